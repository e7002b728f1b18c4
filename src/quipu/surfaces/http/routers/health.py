"""/healthz: liveness plus what the service runs on."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from quipu.memories import MemoryService
from quipu.surfaces.http.deps import service
from quipu.surfaces.http.responses import HealthOut

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness and configuration summary", response_model=HealthOut)
def healthz(svc: Annotated[MemoryService, Depends(service)]) -> dict[str, Any]:
    caps = svc.store.capabilities
    return {
        "status": "ok",
        "backend": caps.backend,
        "vector_search": caps.vector_search,
        "embedder": svc.embedder.model_id if svc.embedder else None,
    }
