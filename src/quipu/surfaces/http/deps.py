"""Request-scoped dependencies: the service and the caller's principal."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from quipu.core.records import Principal
from quipu.service import MemoryService

PrincipalResolver = Callable[[Request], Principal]


async def service(request: Request) -> MemoryService:
    """Async because it does no I/O: FastAPI would run a plain function in a worker thread,
    one more thread hop on every request."""
    svc: MemoryService = request.app.state.service
    return svc


def principal(request: Request) -> Principal:
    resolve: PrincipalResolver = request.app.state.resolve_principal
    return resolve(request)
