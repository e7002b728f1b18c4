"""The HTTP server as `quipu serve` runs it: the API app with MCP mounted at ``/mcp``, on the
runtime the composition root builds from settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fastapi import FastAPI
from threadpoolctl import threadpool_limits

from quipu.auth.ratelimit import SharedRateLimiter
from quipu.composition import (
    build_access,
    build_runtime,
    build_service,
    local_principal,
)
from quipu.embeddings.base import Embedder
from quipu.embeddings.select import build_embedder
from quipu.extraction.base import Extractor
from quipu.runtime import Runtime
from quipu.settings import Settings
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import bearer_resolver, local_resolver
from quipu.surfaces.http.deferred_mcp import mount_mcp_deferred
from quipu.surfaces.metrics import CountingEmbedder, observe_harvest

if TYPE_CHECKING:
    from quipu.core.records import Principal
    from quipu.surfaces.mcp.http import Endpoint


def build_server(
    settings: Settings,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
) -> tuple[FastAPI, Runtime]:
    """The HTTP app, with MCP at ``/mcp``, and its runtime (the worker is not started).

    With ``auth`` on, every request needs a key or run token and writes are rate-limited per
    key; off, requests act as the local principal and MCP checks the Host header."""
    # One BLAS thread: a server runs many recalls at once, and OpenBLAS's own threads for a
    # single scope scan only spin against them. Measured on 2 cores, 10k-row scope, 8
    # concurrent recalls in one process: 103 -> 140 recalls/s, p95 116 -> 85 ms.
    threadpool_limits(limits=1, user_api="blas")
    model = embedder if embedder is not None else build_embedder(settings)
    service = build_service(settings, None if model is None else CountingEmbedder(model))
    runtime = build_runtime(settings, service, extractor=extractor)
    if runtime.harvest is not None:  # harvest drops are counted at /metrics (HARVEST-1)
        runtime.harvest.observer = observe_harvest
    limit = settings.max_body_bytes
    if not settings.auth:
        resolver = local_resolver(local_principal(settings, "http"))
        app = create_app(
            service,
            resolver,
            max_body_bytes=limit,
            runtime=runtime,
            idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
        )
        mcp_principal = local_principal(settings, "mcp")
        mount_mcp_deferred(app, _mcp(runtime, lambda _token: mcp_principal, loopback=True))
        return app, runtime
    service.limiter = SharedRateLimiter(
        service.store, settings.rate_limit_per_second, settings.rate_limit_burst
    )
    access = build_access(settings, service.store)
    app = create_app(
        service,
        bearer_resolver(access),
        max_body_bytes=limit,
        access=access,
        runtime=runtime,
        idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
    )
    authenticate = lambda token: access.authenticate(token, surface="mcp")  # noqa: E731
    mount_mcp_deferred(app, _mcp(runtime, authenticate, loopback=False))
    from quipu.surfaces.console import CONSOLE_PATH, create_console

    app.mount(CONSOLE_PATH, create_console(runtime, access))  # the operator console (OPS-4)
    return app, runtime


def _mcp(
    runtime: Runtime, authenticate: Callable[[str], Principal], *, loopback: bool
) -> Callable[[], Endpoint]:
    """What builds the MCP endpoint once the app runs (:mod:`.deferred_mcp`): importing the
    MCP SDK is most of a server's import time. ``loopback``: a local server without
    authentication, which checks the Host header (DNS rebinding)."""

    def build() -> Endpoint:
        from quipu.surfaces.mcp.http import LOOPBACK_HOSTS, mcp_endpoint

        return mcp_endpoint(
            runtime.service,
            authenticate,
            allowed_hosts=LOOPBACK_HOSTS if loopback else None,
            sessions=runtime.sessions,
            governance=runtime.governance,
            index=runtime.index,
            harvest=runtime.harvest,
        )

    return build
