"""The FastAPI app factory. Endpoints are plain ``def`` functions: FastAPI runs them on its
worker thread pool, and they call the one synchronous service."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from quipu.auth.access import Access
from quipu.governance import GovernanceService
from quipu.memories import MemoryService
from quipu.runtime import Runtime
from quipu.surfaces.http import errors
from quipu.surfaces.http.deps import PrincipalResolver
from quipu.surfaces.http.routers import admin, governance, health, memories, recall, sessions
from quipu.surfaces.http.schemas import ERROR_RESPONSES
from quipu.version import __version__


def create_app(
    service: MemoryService,
    resolve_principal: PrincipalResolver,
    *,
    max_body_bytes: int = 1_048_576,
    access: Access | None = None,
    runtime: Runtime | None = None,
) -> FastAPI:
    app = FastAPI(
        title="Quipu",
        version=__version__,
        description="Memory for AI agents: versioned, bi-temporal, tenant-isolated, hybrid recall.",
    )
    app.state.service = service
    app.state.resolve_principal = resolve_principal
    app.state.access = access
    app.state.runtime = runtime
    app.state.governance = runtime.governance if runtime else GovernanceService(service)
    errors.install(app)

    app.add_middleware(BodyCap, limit=max_body_bytes)
    app.include_router(health.router)
    for router in (memories.router, recall.router, sessions.router, admin.router):
        app.include_router(router, responses=ERROR_RESPONSES)
    app.include_router(governance.router, responses=ERROR_RESPONSES)
    return app


class BodyCap:
    """413 ``payload_too_large`` for a declared body over ``limit`` bytes, before any of it is
    read. Plain ASGI: Starlette's ``BaseHTTPMiddleware`` (``@app.middleware``) costs a task
    group and stream wrappers on every request."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                    response = errors.envelope(
                        413,
                        "payload_too_large",
                        f"request bodies are limited to {self.limit} bytes",
                    )
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
