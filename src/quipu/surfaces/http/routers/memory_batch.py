"""``POST /v1/memories/batch``: many memories of one scope in one call (issue 23, ingest)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from quipu.core.records import Principal
from quipu.memories import MemoryService
from quipu.memory_batch import MAX_ITEMS, outcome_dict, remember_many
from quipu.surfaces.http.deps import principal, service
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.responses import Answer, MemoryOut
from quipu.surfaces.http.schemas import Body, ErrorDetail

router = APIRouter(prefix="/v1/memories", tags=["memories"])
Svc = Annotated[MemoryService, Depends(service)]
Who = Annotated[Principal, Depends(principal)]


class RememberManyBody(Body):
    scope: str = Field("agent", description="agent, user, agent_user, tenant or global.")
    items: list[Any] = Field(
        description=f"At most {MAX_ITEMS} memories (413 too_many_items beyond): each a text, or "
        "an object with `text` and any field of POST /v1/memories except `scope`."
    )


class RememberManyItemOut(Answer):
    index: int = Field(description="The item's place in `items`.")
    status: int = Field(description="201 written, 200 an exact duplicate, else the refusal's.")
    memory: MemoryOut | None = Field(None, description="The memory written or met.")
    created: bool | None = Field(None, description="False: an exact duplicate (MEM-6).")
    error: ErrorDetail | None = Field(None, description="Why this item alone was refused.")


class RememberManyOut(Answer):
    results: list[RememberManyItemOut]


@router.post(
    "/batch",
    response_model=RememberManyOut,
    summary="Remember many memories of one scope in one call",
    responses={200: {"description": "One result per item, in order: written or refused alone"}},
)
def remember_many_route(body: RememberManyBody, svc: Svc, who: Who) -> SafeJSONResponse:
    outcomes = remember_many(svc, who, body.items, scope=body.scope)
    return SafeJSONResponse({"results": [outcome_dict(n, o) for n, o in enumerate(outcomes)]})
