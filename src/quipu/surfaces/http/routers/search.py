"""/v1/search: one search across every plane of one scope, each row labelled with its plane
(RECALL-8)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from quipu.core.records import Principal
from quipu.kv import KeyValueService
from quipu.search import SearchService
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.plane_responses import (
    PlaneSearchOut,
)
from quipu.surfaces.http.routers.documents import documents
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["search"])


async def searcher(request: Request) -> SearchService:
    """Search over the app's memory, documents and key/value use cases, built on first use."""
    found: SearchService | None = getattr(request.app.state, "search", None)
    if found is None:
        service = request.app.state.service
        found = SearchService(service, await documents(request), KeyValueService(service))
        request.app.state.search = found
    return found


class SearchBody(Body):
    query: Any = Field(description="What to look for, at most max_query_chars characters.")
    scope: str = "agent"
    k: int | None = Field(None, description="How many rows in all (default_k when absent).")
    planes: list[str] | None = Field(
        None, description="Only these planes: facts, notes, documents, kv, graph (default: all)."
    )


@router.post("/search", response_model=PlaneSearchOut, summary="Search every plane of one scope")
def search(
    body: SearchBody,
    svc: Annotated[SearchService, Depends(searcher)],
    who: Annotated[Principal, Depends(principal)],
) -> SafeJSONResponse:
    return SafeJSONResponse(
        svc.search(who, body.query, scope=body.scope, k=body.k, planes=body.planes)
    )
