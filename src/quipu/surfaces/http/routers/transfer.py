"""/v1/export: the tenant's memories as a JSON Lines stream (API-4), for admins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from quipu import transfer
from quipu.core.records import Principal, Role
from quipu.errors import Forbidden
from quipu.memories import MemoryService
from quipu.surfaces.http.deps import principal, service

router = APIRouter(prefix="/v1", tags=["transfer"])

ADMINS = (Role.ADMIN, Role.SUPERADMIN)


@router.get(
    "/export",
    summary="Export every version of the tenant, with vectors (admins)",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "JSON Lines"}},
)
def export(
    svc: Annotated[MemoryService, Depends(service)],
    who: Annotated[Principal, Depends(principal)],
) -> StreamingResponse:
    """The format of `quipu export` (header line, then one version per line): what
    `quipu import` and :meth:`quipu.Quipu.import_` read back."""
    if who.role not in ADMINS:
        raise Forbidden("exporting the tenant is for admins", code="forbidden")
    rows = svc.export(who)

    def lines() -> Iterator[str]:
        yield json.dumps(transfer.header()) + "\n"
        for memory, vector in rows:
            yield json.dumps(transfer.encode(memory, vector), ensure_ascii=False) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")
