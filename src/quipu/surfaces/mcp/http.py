"""The MCP server over streamable HTTP, mounted in the HTTP app at ``/mcp``.

Every request is authenticated on its own (SCOPE-1): ``Authorization: Bearer <key or run
token>`` goes through the injected ``authenticate``; a refused credential is a 401 in the API
error envelope before the MCP layer sees the request, and the tools read the principal of the
very request that carries the call. The transport is stateless (no MCP session outlives a
request), so nothing is cached across clients and any worker process can answer any request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from quipu.core.records import Principal
from quipu.errors import LimitExceeded, QuipuError, Unauthorized
from quipu.governance import GovernanceService
from quipu.memories import MemoryService
from quipu.sessions import SessionService
from quipu.surfaces.http.errors import envelope
from quipu.surfaces.mcp.server import create_mcp_server

#: Maps a bearer token to its principal; raises Unauthorized to refuse. It receives ``""``
#: when the request presents no bearer credential (local mode accepts that, auth mode not).
Authenticate = Callable[[str], Principal]

#: Where the authenticated principal rides in the ASGI scope of one request.
PRINCIPAL_SCOPE_KEY = "quipu.principal"

#: Host patterns for a server that only listens on loopback (DNS-rebinding protection).
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


def principal_from_request(ctx: Context) -> Principal:
    """The principal :class:`BearerAuth` put on the HTTP request carrying this tool call.

    Fails closed: a call that reached the tools without passing authentication is refused.
    """
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    principal = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(principal, Principal):
        raise Unauthorized("this request carries no authenticated principal")
    return principal


class BearerAuth:
    """ASGI wrapper: authenticate the request, then pass it on with its principal attached."""

    def __init__(self, app: ASGIApp, authenticate: Authenticate) -> None:
        self.app = app
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = bearer_token(Headers(scope=scope).get("authorization"))
        try:
            # Checking a credential reads the store: off the event loop, like every service call.
            principal = await anyio.to_thread.run_sync(self.authenticate, token)
        except QuipuError as exc:
            response = envelope(exc.status, exc.code, exc.message, exc.details)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            if isinstance(exc, LimitExceeded) and exc.retry_after is not None:
                response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
            await response(scope, receive, send)
            return
        # A copy: the principal belongs to this request only.
        inner = {**scope, PRINCIPAL_SCOPE_KEY: replace(principal, surface="mcp")}
        await self.app(inner, receive, send)


def bearer_token(header: str | None) -> str:
    """The token of ``Authorization: Bearer <token>``; ``""`` when there is none."""
    if header is None:
        return ""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class _Transport:
    """The streamable HTTP endpoint; its session manager lives as long as the app's lifespan."""

    def __init__(self, server: MCPServer, security: TransportSecuritySettings) -> None:
        self.server = server
        self.security = security
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A manager runs once; building a fresh one per lifespan lets the app restart.
        self.server.streamable_http_app(
            stateless_http=True, json_response=True, transport_security=self.security
        )
        manager = self.server.session_manager
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            response = envelope(
                503, "unavailable", "the MCP endpoint is not running (the app lifespan is off)"
            )
            await response(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)


def mount_mcp(
    app: Starlette,
    service: MemoryService,
    authenticate: Authenticate,
    *,
    path: str = "/mcp",
    allowed_hosts: Sequence[str] | None = None,
    sessions: SessionService | None = None,
    governance: GovernanceService | None = None,
) -> MCPServer:
    """Serve the MCP tools at ``path`` of ``app``, each request authenticated by ``authenticate``.

    ``allowed_hosts`` turns on DNS-rebinding protection (Host and Origin checks), e.g.
    :data:`LOOPBACK_HOSTS` for a local server without authentication. The endpoint runs inside
    the app's lifespan, which this wraps.
    """
    server = create_mcp_server(
        service, principal_from_request, sessions=sessions, governance=governance
    )
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if allowed_hosts is not None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(allowed_hosts),
            allowed_origins=[f"{s}://{h}" for h in allowed_hosts for s in ("http", "https")],
        )
    transport = _Transport(server, security)
    app.router.routes.append(Route(path, endpoint=BearerAuth(transport, authenticate)))
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(outer: Any) -> AsyncIterator[Any]:
        async with transport.running(), previous(outer) as state:
            yield state

    app.router.lifespan_context = lifespan
    return server
