"""Request-scoped dependencies: the service and the caller's principal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from quipu.core.records import Principal
from quipu.memories import MemoryService


@dataclass(frozen=True)
class PrincipalResolver:
    """How a request's principal is found. ``blocking``: resolving reads the store (bearer
    credentials), so it runs in a worker thread; otherwise (local mode) it runs on the event
    loop and the request skips one thread hop."""

    resolve: Callable[[Request], Principal]
    blocking: bool


async def service(request: Request) -> MemoryService:
    """Async because it does no I/O: FastAPI would run a plain function in a worker thread,
    one more thread hop on every request."""
    svc: MemoryService = request.app.state.service
    return svc


async def principal(request: Request) -> Principal:
    resolver: PrincipalResolver = request.app.state.resolve_principal
    if resolver.blocking:
        return await run_in_threadpool(resolver.resolve, request)
    return resolver.resolve(request)
