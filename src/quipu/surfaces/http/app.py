"""The FastAPI app factory. Endpoints are plain ``def`` functions: FastAPI runs them on its
worker thread pool, and they call the one synchronous service."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

from quipu import __version__
from quipu.auth.access import Access
from quipu.composition import Runtime
from quipu.service import MemoryService
from quipu.surfaces.http import errors
from quipu.surfaces.http.deps import PrincipalResolver
from quipu.surfaces.http.routers import admin, health, memories, recall, sessions
from quipu.surfaces.http.schemas import ERROR_RESPONSES


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
    errors.install(app)

    @app.middleware("http")
    async def cap_body(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body_bytes):
            return errors.envelope(
                413, "payload_too_large", f"request bodies are limited to {max_body_bytes} bytes"
            )
        return await call_next(request)

    app.include_router(health.router)
    for router in (memories.router, recall.router, sessions.router, admin.router):
        app.include_router(router, responses=ERROR_RESPONSES)
    return app
