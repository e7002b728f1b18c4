"""Request-scoped dependencies: the service and the caller's principal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from quipu.core.records import Principal
from quipu.errors import Unauthorized
from quipu.memories import MemoryService

#: Where :class:`quipu.surfaces.http.guard.RequestGuard` puts the principal it resolved from
#: the request's headers, before the body was read.
PRINCIPAL_KEY = "quipu.principal"


@dataclass(frozen=True)
class PrincipalResolver:
    """How a request's principal is found, from its headers alone. ``blocking``: resolving
    reads the store (bearer credentials), so it runs in a worker thread; otherwise (local mode)
    it runs on the event loop and the request skips one thread hop."""

    resolve: Callable[[Request], Principal]
    blocking: bool


async def resolve_principal(resolver: PrincipalResolver, request: Request) -> Principal:
    """The one place a request's credential becomes a principal (the guard calls it)."""
    if resolver.blocking:
        return await run_in_threadpool(resolver.resolve, request)
    return resolver.resolve(request)


async def service(request: Request) -> MemoryService:
    """Async because it does no I/O: FastAPI would run a plain function in a worker thread,
    one more thread hop on every request."""
    svc: MemoryService = request.app.state.service
    return svc


async def principal(request: Request) -> Principal:
    """The principal the guard resolved for this request. Fails closed: an endpoint reached
    without passing the guard (a route outside ``/v1``) acts for nobody."""
    found = request.scope.get(PRINCIPAL_KEY)
    if not isinstance(found, Principal):
        raise Unauthorized("this request was not authenticated")
    return found
