"""The MCP server over streamable HTTP, mounted in the HTTP app at ``/mcp``.

Every request is authenticated on its own (SCOPE-1): ``Authorization: Bearer <key or run
token>`` goes through the injected ``authenticate``; a refused credential is a 401 in the API
error envelope before the MCP layer sees the request, and the tools read the principal of the
very request that carries the call. The transport is stateless (no MCP session outlives a
request), so nothing is cached across clients and any worker process can answer any request.

The body is read only after the credential passed, counted against ``max_body_bytes`` as it
streams in (413 and the connection closed once over, chunked or not), and screened before the
SDK parses it: a message nested too deep or holding a lone surrogate or NUL is answered 400
with a JSON-RPC error naming the field and carrying the request's id (issue 20, defects 1, 13).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from quipu.consolidation.index import IndexService
from quipu.core.records import Principal
from quipu.errors import QuipuError, Unauthorized
from quipu.governance import GovernanceService
from quipu.harvest import Harvester
from quipu.memories import MemoryService
from quipu.sessions import SessionService
from quipu.surfaces.http.errors import envelope, error_response
from quipu.surfaces.http.guard import Exchange, too_large
from quipu.surfaces.mcp.screen import refusal_error
from quipu.surfaces.mcp.server import create_mcp_server

#: Maps a bearer token to its principal; raises Unauthorized to refuse. It receives ``""``
#: when the request presents no bearer credential (local mode accepts that, auth mode not).
Authenticate = Callable[[str], Principal]

#: Where the authenticated principal rides in the ASGI scope of one request.
PRINCIPAL_SCOPE_KEY = "quipu.principal"

#: The largest MCP request body unless ``mount_mcp`` is told otherwise (the settings' default).
DEFAULT_MAX_BODY_BYTES = 1_048_576

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
    """ASGI wrapper: authenticate the request from its headers, then read and screen its body,
    then pass it on with its principal attached."""

    def __init__(
        self, app: ASGIApp, authenticate: Authenticate, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(scope, receive, send, self.max_body_bytes)
        if exchange.declared is not None and exchange.declared > self.max_body_bytes:
            await exchange.refuse(error_response(too_large(self.max_body_bytes)))
            return
        token = bearer_token(Headers(scope=scope).get("authorization"))
        try:
            # Checking a credential reads the store: off the event loop, like every service call.
            principal = await anyio.to_thread.run_sync(self.authenticate, token)
        except QuipuError as exc:
            await exchange.refuse(error_response(exc))
            return
        if exchange.has_body:
            body = await exchange.read_body()
            if body is None:
                return  # refused as too large, or the client left
            error = refusal_error(body)
            if error is not None:
                await exchange.refuse(
                    JSONResponse(error.model_dump(mode="json", exclude_unset=True), status_code=400)
                )
                return
            exchange.replay(body)
        # A copy: the principal belongs to this request only.
        inner = {**scope, PRINCIPAL_SCOPE_KEY: replace(principal, surface="mcp")}
        await self.app(inner, exchange.receive, exchange.send)


def bearer_token(header: str | None) -> str:
    """The token of ``Authorization: Bearer <token>``; ``""`` when there is none."""
    if header is None:
        return ""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class _Transport:
    """The streamable HTTP endpoint; its session manager lives as long as the app's lifespan."""

    def __init__(
        self, server: MCPServer, security: TransportSecuritySettings, max_body_bytes: int
    ) -> None:
        self.server = server
        self.security = security
        self.max_body_bytes = max_body_bytes
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A manager runs once; building a fresh one per lifespan lets the app restart.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=self.security,
            max_request_body_size=self.max_body_bytes,
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
    index: IndexService | None = None,
    harvest: Harvester | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> MCPServer:
    """Serve the MCP tools at ``path`` of ``app``, each request authenticated by ``authenticate``.

    ``allowed_hosts`` turns on DNS-rebinding protection (Host and Origin checks), e.g.
    :data:`LOOPBACK_HOSTS` for a local server without authentication. The endpoint runs inside
    the app's lifespan, which this wraps. A request body over ``max_body_bytes`` is refused
    (413); in the HTTP app the app-wide limit applies first.
    """
    endpoint = mcp_endpoint(
        service,
        authenticate,
        allowed_hosts=allowed_hosts,
        sessions=sessions,
        governance=governance,
        index=index,
        harvest=harvest,
        max_body_bytes=max_body_bytes,
    )
    app.router.routes.append(Route(path, endpoint=endpoint.app))
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(outer: Any) -> AsyncIterator[Any]:
        async with endpoint.running(), previous(outer) as state:
            yield state

    app.router.lifespan_context = lifespan
    return endpoint.server


@dataclass(frozen=True)
class Endpoint:
    """The MCP endpoint of :func:`mcp_endpoint`: its ASGI app, answering once ``running()``
    is entered (for the app's lifespan), and its server."""

    app: ASGIApp
    running: Callable[[], AbstractAsyncContextManager[None]]
    server: MCPServer


def mcp_endpoint(
    service: MemoryService,
    authenticate: Authenticate,
    *,
    allowed_hosts: Sequence[str] | None = None,
    sessions: SessionService | None = None,
    governance: GovernanceService | None = None,
    index: IndexService | None = None,
    harvest: Harvester | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Endpoint:
    """The authenticated MCP endpoint :func:`mount_mcp` mounts (see there), not yet mounted."""
    server = create_mcp_server(
        service,
        principal_from_request,
        sessions=sessions,
        governance=governance,
        index=index,
        harvest=harvest,
    )
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if allowed_hosts is not None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(allowed_hosts),
            allowed_origins=[f"{s}://{h}" for h in allowed_hosts for s in ("http", "https")],
        )
    transport = _Transport(server, security, max_body_bytes)
    return Endpoint(BearerAuth(transport, authenticate, max_body_bytes), transport.running, server)
