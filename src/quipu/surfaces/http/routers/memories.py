"""/v1/memories: remember, list, get, revise or change status, forget, history, supersede."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query

from quipu.core.records import Principal
from quipu.errors import InvalidInput, PreconditionRequired
from quipu.memories import MemoryService
from quipu.surfaces.forgetting import forget_once
from quipu.surfaces.http.deps import principal, service
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.responses import HistoryOut, MemoryOut, MemoryPageOut, RememberOut
from quipu.surfaces.http.schemas import ForgetBody, PatchBody, RememberBody, SupersedeBody

#: Endpoints answer with :class:`SafeJSONResponse` themselves (documented as ``Json``): FastAPI's
#: own serializer fails on a stored lone surrogate and turns a read into a 500 (issue 20).
router = APIRouter(prefix="/v1/memories", tags=["memories"])
Json = dict[str, Any]
Svc = Annotated[MemoryService, Depends(service)]
Who = Annotated[Principal, Depends(principal)]


@router.post(
    "",
    status_code=201,
    summary="Remember a memory",
    response_model=RememberOut,
    responses={200: {"description": "An exact duplicate: the existing live memory (MEM-6)"}},
)
def remember(body: RememberBody, svc: Svc, who: Who) -> SafeJSONResponse:
    result = svc.remember(who, **body.model_dump())
    return SafeJSONResponse(
        result.to_dict(),
        status_code=201 if result.created else 200,
        headers={"Location": memory_url(result.memory.id)},
    )


def memory_url(memory_id: str) -> str:
    return "/v1/memories/" + quote(memory_id, safe="")


@router.get("", response_model=MemoryPageOut, summary="List memories in one scope")
def list_memories(
    svc: Svc,
    who: Who,
    scope: str = "agent",
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    as_of: datetime | None = None,
    observed_after: datetime | None = None,
    observed_before: datetime | None = None,
    kinds: Annotated[list[str] | None, Query()] = None,
    tags: Annotated[list[str] | None, Query()] = None,
    sources: Annotated[list[str] | None, Query()] = None,
    min_confidence: float | None = None,
    project: str | None = None,
    statuses: Annotated[list[str] | None, Query()] = None,
) -> SafeJSONResponse:
    page = svc.list(
        who,
        scope=scope,
        cursor=cursor,
        limit=limit,
        as_of=as_of,
        observed_after=observed_after,
        observed_before=observed_before,
        kinds=kinds,
        tags=tags,
        sources=sources,
        min_confidence=min_confidence,
        project=project,
        statuses=statuses,
    )
    return SafeJSONResponse(
        {"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}
    )


@router.get("/{memory_id}", response_model=MemoryOut, summary="Get a memory's current version")
def get_memory(memory_id: str, svc: Svc, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(svc.get(who, memory_id).to_dict())


@router.patch(
    "/{memory_id}", response_model=MemoryOut, summary="Revise a memory's text or move its status"
)
def patch_memory(memory_id: str, body: PatchBody, svc: Svc, who: Who) -> SafeJSONResponse:
    if (body.text is None) == (body.status is None):
        raise InvalidInput("send exactly one of text or status", code="invalid_patch")
    _require_version(svc, who, memory_id, body.expected_version)
    if body.text is not None:
        memory = svc.revise(
            who,
            memory_id,
            body.text,
            expected_version=body.expected_version,
            reason=body.reason,
            valid_at=body.valid_at,
        )
    else:
        memory = svc.set_status(
            who,
            memory_id,
            body.status,
            expected_version=body.expected_version,
            reason=body.reason,
        )
    return SafeJSONResponse(memory.to_dict())


@router.delete(
    "/{memory_id}", response_model=MemoryOut, summary="Forget a memory (logical; history keeps it)"
)
def forget_memory(
    memory_id: str,
    svc: Svc,
    who: Who,
    reason: str | None = None,
    expected_version: int | None = None,
) -> SafeJSONResponse:
    """Kept for clients that cannot send a body with DELETE; a reason here travels in the URL,
    so prefer ``POST /v1/memories/{id}/forget``."""
    forgotten = forget_once(
        lambda: svc.forget(who, memory_id, reason=reason, expected_version=expected_version),
        lambda: svc.history(who, memory_id),
    )
    return SafeJSONResponse(forgotten.to_dict())


@router.post(
    "/{memory_id}/forget",
    response_model=MemoryOut,
    summary="Forget a memory, the reason in the body (it never enters a URL or an access log)",
)
def forget_with_body(memory_id: str, body: ForgetBody, svc: Svc, who: Who) -> SafeJSONResponse:
    forgotten = forget_once(
        lambda: svc.forget(
            who, memory_id, reason=body.reason, expected_version=body.expected_version
        ),
        lambda: svc.history(who, memory_id),
    )
    return SafeJSONResponse(forgotten.to_dict())


@router.get("/{memory_id}/history", response_model=HistoryOut, summary="Every version of a memory")
def history(memory_id: str, svc: Svc, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse({"versions": [v.to_dict() for v in svc.history(who, memory_id)]})


@router.post(
    "/{memory_id}/supersede",
    response_model=MemoryOut,
    summary="Mark a memory superseded by another",
)
def supersede(memory_id: str, body: SupersedeBody, svc: Svc, who: Who) -> SafeJSONResponse:
    _require_version(svc, who, memory_id, body.expected_version)
    superseded = svc.supersede(
        who, memory_id, body.new_id, reason=body.reason, expected_version=body.expected_version
    )
    return SafeJSONResponse(superseded.to_dict())


def _require_version(
    svc: MemoryService, who: Principal, memory_id: str, expected: int | None
) -> None:
    """LIFE-2: over HTTP a change names the version it replaces (428 when it does not). A
    foreign or missing id is the same 404 first (SCOPE-7)."""
    if expected is None:
        svc.guard.authorise(who, memory_id, None, write=True)
        raise PreconditionRequired(
            "name the version you replace: expected_version (the version you read)",
            details={"field": "expected_version"},
        )
