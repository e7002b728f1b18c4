"""The FastAPI app factory. Endpoints are plain ``def`` functions: FastAPI runs them on its
worker thread pool, and they call the one synchronous service."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp

from quipu.auth.access import Access
from quipu.memories import MemoryService
from quipu.runtime import Runtime
from quipu.surfaces.http import errors
from quipu.surfaces.http.deps import PrincipalResolver
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.guard import RequestGuard
from quipu.surfaces.http.routers import (
    admin,
    governance,
    health,
    knowledge,
    memories,
    recall,
    sessions,
    transfer,
)
from quipu.surfaces.http.schemas import ERROR_RESPONSES
from quipu.version import __version__


class QuipuAPI(FastAPI):
    """FastAPI with :class:`errors.ContainFailures` outside Starlette's own error layer."""

    def build_middleware_stack(self) -> ASGIApp:
        return errors.ContainFailures(super().build_middleware_stack())


def create_app(
    service: MemoryService,
    resolve_principal: PrincipalResolver,
    *,
    max_body_bytes: int = 1_048_576,
    access: Access | None = None,
    runtime: Runtime | None = None,
) -> FastAPI:
    """The HTTP API. ``resolve_principal`` turns a request's headers into its principal; the
    guard (:class:`RequestGuard`) calls it for every ``/v1`` request before the body is read."""
    app = QuipuAPI(
        title="Quipu",
        version=__version__,
        description="Memory for AI agents: versioned, bi-temporal, tenant-isolated, hybrid recall.",
        default_response_class=SafeJSONResponse,
    )
    app.state.service = service
    app.state.resolve_principal = resolve_principal
    app.state.access = access
    app.state.runtime = runtime
    app.state.governance = runtime.governance if runtime else None  # built on first use
    errors.install(app)

    app.add_middleware(RequestGuard, limit=max_body_bytes, resolver=resolve_principal)
    app.include_router(health.router)
    for router in (memories.router, recall.router, sessions.router, admin.router, transfer.router):
        app.include_router(router, responses=ERROR_RESPONSES)
    app.include_router(governance.router, responses=ERROR_RESPONSES)
    app.include_router(knowledge.router, responses=ERROR_RESPONSES)
    return app
