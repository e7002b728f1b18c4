"""The transport guard: everything a request must pass before the app reads its body.

Plain ASGI (Starlette's ``BaseHTTPMiddleware`` costs a task group and stream wrappers on every
request). For each HTTP request, in this order (SAFE-5, SCOPE-1, issue 20 defect 1):

1. A declared ``Content-Length`` over the limit: 413 ``payload_too_large``, nothing read.
2. Under ``/v1``: the principal is resolved from the headers alone (401, or the resolver's
   own code) before one byte of the body is read, and rides to the endpoint in the scope
   (:data:`quipu.surfaces.http.deps.PRINCIPAL_KEY`); then a NUL in the path or a query
   parameter is refused (422 ``invalid_text``).
3. Every body, ``Content-Length`` and ``Transfer-Encoding: chunked`` alike, is counted as it
   streams in: the moment the count passes the limit the answer is 413 and the connection is
   closed, so the rest of a hostile stream is never read. ``/mcp`` is counted the same way.
4. Under ``/v1`` a JSON body is screened (:mod:`quipu.surfaces.http.inbound`: nesting depth,
   lone surrogates, NUL) before the framework parses it: 422 ``json_too_deep`` or
   ``invalid_text`` with the field's path.

An answer to a request whose body is still streaming carries ``Connection: close``, the
guard's own and the app's alike (a 404 or 405 page, the ``/mcp/`` redirect, a console page that
never read the body): uvicorn would otherwise read (and discard) the rest of the body to keep
the connection alive, a gigabyte if a client sends one.
A body declared within the limit is the exception: the server drains those few bytes and keeps
the connection.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quipu.errors import PayloadTooLarge, QuipuError
from quipu.surfaces.http import errors
from quipu.surfaces.http.deps import PRINCIPAL_KEY, PrincipalResolver, resolve_principal
from quipu.surfaces.http.inbound import Refusal, screen_json, screen_url
from quipu.surfaces.http.observe import note_principal

#: Requests under this prefix act for a principal; everything else (``/healthz``, the OpenAPI
#: document and its pages, ``/mcp`` with its own bearer check) is public or guarded elsewhere.
API_PREFIX = "/v1"

_DISCONNECT: Message = {"type": "http.disconnect"}


class RequestGuard:
    def __init__(self, app: ASGIApp, *, limit: int, resolver: PrincipalResolver) -> None:
        self.app = app
        self.limit = limit
        self.resolver = resolver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(scope, receive, send, self.limit)
        if exchange.declared is not None and exchange.declared > self.limit:
            await exchange.refuse(errors.error_response(too_large(self.limit)))
            return
        if _under_api(scope):
            try:
                principal = await resolve_principal(self.resolver, Request(scope))
            except QuipuError as exc:
                await exchange.refuse(errors.error_response(exc))
                return
            note_principal(scope, principal.key_id)
            scope = {**scope, PRINCIPAL_KEY: principal}
            refusal = screen_url(scope["path"], scope.get("query_string", b""))
            if refusal is None and exchange.has_body and _json_body(scope):
                body = await exchange.read_body()
                if body is None:
                    return  # refused as too large, or the client left
                refusal = screen_json(body)
                exchange.replay(body)
            if refusal is not None:
                await exchange.refuse(refused(refusal))
                return
        await self.app(scope, exchange.receive, exchange.send)


class Exchange:
    """One request's receive and send, wrapped: body bytes counted against ``limit``, and once
    the guard has answered, the app's own answer dropped."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        self.scope = scope
        self.limit = limit
        self._receive = receive
        self._send = send
        self.declared = declared_length(scope)
        chunked = any(name == b"transfer-encoding" for name, _ in scope["headers"])
        self.has_body = chunked or bool(self.declared)
        self.received = 0
        self.complete = not self.has_body
        self.started = False
        self.answered = False
        self._replay: Message | None = None

    async def receive(self) -> Message:
        if self._replay is not None:
            message, self._replay = self._replay, None
            return message
        if self.answered:
            return _DISCONNECT
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                await self.refuse(errors.error_response(too_large(self.limit)))
                return _DISCONNECT
            if not message.get("more_body", False):
                self.complete = True
        return message

    async def send(self, message: Message) -> None:
        if self.answered:
            return  # the guard answered already; the app's late answer goes nowhere
        if message["type"] == "http.response.start":
            self.started = True
            if self.unread():  # a 404, a redirect, a page that never read the body
                headers = [(n, v) for n, v in message.get("headers", []) if n != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await self._send(message)

    def unread(self) -> bool:
        """A body is still streaming in and was not declared within the limit: answering
        without ``Connection: close`` would let the server read (and discard) all of it."""
        within = self.declared is not None and self.declared <= self.limit
        return self.has_body and not self.complete and not within

    async def read_body(self) -> bytes | None:
        """The whole body (at most ``limit`` bytes), or ``None`` when it was refused as too
        large (answered already) or the client disconnected."""
        parts: list[bytes] = []
        while True:
            message = await self.receive()
            if message["type"] != "http.request":
                return None
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(parts)

    def replay(self, body: bytes) -> None:
        """The app's first receive gets ``body`` (read by the guard) in one message."""
        self._replay = {"type": "http.request", "body": body, "more_body": False}

    async def refuse(self, response: Response) -> None:
        """Answer now, unless the app already started its own response (then it is only cut
        off: its later messages are dropped and it sees a disconnect)."""
        if not self.started:
            if self.unread():
                response.headers["connection"] = "close"
            self.started = True
            await response(self.scope, _no_receive, self._send)
        self.answered = True


def declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` header; a malformed one counts as unbounded."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() and len(value) < 20 else 1 << 62
    return None


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"request bodies are limited to {limit} bytes", details={"limit_bytes": limit}
    )


def refused(refusal: Refusal) -> Response:
    return errors.envelope(422, refusal.code, refusal.message, refusal.details())


def _under_api(scope: Scope) -> bool:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def _json_body(scope: Scope) -> bool:
    """The framework would parse this body as JSON (or might: no content type at all)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return True


async def _no_receive() -> Message:  # pragma: no cover - a plain response never receives
    return _DISCONNECT
