"""/v1/recall: hybrid recall in one scope (RECALL-1..5)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request

from quipu.core.records import Principal
from quipu.memories import MemoryService
from quipu.surfaces.http.deps import principal, service
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.schemas import RecallBody

router = APIRouter(prefix="/v1", tags=["recall"])


@router.post(
    "/recall", summary="Recall memories relevant to a query", response_model=dict[str, Any]
)
async def recall(
    body: RecallBody,
    request: Request,
    svc: Annotated[MemoryService, Depends(service)],
    who: Annotated[Principal, Depends(principal)],
) -> SafeJSONResponse:
    """The service's recall in a worker thread, as FastAPI would run a plain function, but
    behind its own limiter of ``recall_concurrency`` threads: requests beyond it wait on the
    event loop instead of in threads parked on the service's semaphore, which cost every
    request more interpreter-lock handoffs (2 cores, `--workers 2`, c=8: p95 38-51 -> 33-42
    ms, docs/benchmarks.md)."""

    def run() -> SafeJSONResponse:
        result = svc.recall(
            who, body.query, scope=body.scope, k=body.k, planes=body.planes, **body.filters()
        )
        # The hottest route: its dict is JSON-ready (RecallResult.to_dict), so it is encoded
        # once here instead of walked again by FastAPI's jsonable_encoder (~0.6 ms).
        return SafeJSONResponse(result.to_dict())

    return await anyio.to_thread.run_sync(run, limiter=_recall_limiter(request, svc))


def _recall_limiter(request: Request, svc: MemoryService) -> anyio.CapacityLimiter | None:
    """One limiter per app, made on first use (it belongs to the running event loop)."""
    slots = svc.limits.recall_concurrency
    if slots is None:
        return None
    limiter: anyio.CapacityLimiter | None = getattr(request.app.state, "recall_limiter", None)
    if limiter is None:
        limiter = request.app.state.recall_limiter = anyio.CapacityLimiter(slots)
    return limiter
