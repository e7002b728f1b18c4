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
from quipu.surfaces.http.idempotency import Idempotency
from quipu.surfaces.http.observe import RequestContext, route_templates
from quipu.surfaces.http.openapi import declare_bearer
from quipu.surfaces.http.routers import (
    admin,
    documents,
    governance,
    graph,
    health,
    index,
    knowledge,
    kv,
    memories,
    memory_batch,
    ops,
    placement,
    recall,
    search,
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
    idempotency_ttl_seconds: int = 86_400,
) -> FastAPI:
    """The HTTP API. ``resolve_principal`` turns a request's headers into its principal; the
    guard (:class:`RequestGuard`) calls it for every ``/v1`` request before the body is read."""
    app = QuipuAPI(
        title="Quipu",
        version=__version__,
        description="Memory for AI agents: versioned, bi-temporal, tenant-isolated, hybrid recall.",
        default_response_class=SafeJSONResponse,
        docs_url=None,  # served from bundled files by routers.ops.install_docs (no CDN)
        redoc_url=None,
    )
    app.state.service = service
    app.state.resolve_principal = resolve_principal
    app.state.access = access
    app.state.runtime = runtime
    app.state.governance = runtime.governance if runtime else None  # built on first use
    errors.install(app)

    # inside the guard: the principal is known and the body bounded before a key is claimed
    app.add_middleware(
        Idempotency, store=lambda: app.state.service.store, ttl_seconds=idempotency_ttl_seconds
    )
    app.add_middleware(RequestGuard, limit=max_body_bytes, resolver=resolve_principal)
    # outermost: the request id, the request's log line and its metrics
    app.add_middleware(RequestContext, templates=lambda: route_templates(app))
    app.include_router(health.router)
    app.include_router(ops.router)
    ops.install_docs(app)
    declare_bearer(app)
    for router in (memories.router, recall.router, sessions.router, admin.router, transfer.router):
        app.include_router(router, responses=ERROR_RESPONSES)
    app.include_router(governance.router, responses=ERROR_RESPONSES)
    app.include_router(kv.router, responses=ERROR_RESPONSES)
    app.include_router(documents.router, responses=ERROR_RESPONSES)
    app.include_router(search.router, responses=ERROR_RESPONSES)
    app.include_router(knowledge.router, responses=ERROR_RESPONSES)
    app.include_router(index.router, responses=ERROR_RESPONSES)
    app.include_router(graph.router, responses=ERROR_RESPONSES)
    app.include_router(placement.router, responses=ERROR_RESPONSES)  # GRAPH-2
    app.include_router(memory_batch.router, responses=ERROR_RESPONSES)  # issue 23, bulk write
    return app
