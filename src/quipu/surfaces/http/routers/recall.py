"""/v1/recall: hybrid recall in one scope (RECALL-1..5)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from quipu.core.records import Principal
from quipu.service import MemoryService
from quipu.surfaces.http.deps import principal, service
from quipu.surfaces.http.schemas import RecallBody

router = APIRouter(prefix="/v1", tags=["recall"])


@router.post("/recall", summary="Recall memories relevant to a query")
def recall(
    body: RecallBody,
    svc: Annotated[MemoryService, Depends(service)],
    who: Annotated[Principal, Depends(principal)],
) -> dict[str, Any]:
    result = svc.recall(
        who, body.query, scope=body.scope, k=body.k, planes=body.planes, **body.filters()
    )
    return result.to_dict()
