"""The outermost layer of the served app (OPS-1, issue 27): a request id, one structured log
line and the metrics of every HTTP request.

- ``X-Request-Id``: a caller's id is kept when it is 1-128 characters of ``A-Z a-z 0-9`` and
  ``. _ : @ / + = -`` (what tracing systems send); anything else (a NUL, bytes that are not
  ASCII, an oversized value, two headers) is refused 422 ``invalid_request_id``. Without one, a
  random id is made. Every answer carries the id back in ``X-Request-Id``.
- One line on the ``quipu.request`` logger per request: request id, the principal's key id,
  method, route template (``/v1/memories/{memory_id}``: never the raw path, so no id, and never
  a query string), status and duration. Never a body, a memory text or a credential.
- ``quipu_http_requests_total`` / ``quipu_http_request_duration_seconds`` by route template,
  method and status (:mod:`quipu.surfaces.metrics`).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quipu.safety import find_secrets
from quipu.surfaces import metrics
from quipu.surfaces.http import errors

log = logging.getLogger("quipu.request")

HEADER = b"x-request-id"
#: Where the request's :class:`RequestInfo` rides in the ASGI scope (layers that copy the scope
#: share the one object, so the guard can name the principal it resolved).
CONTEXT_KEY = "quipu.request"
_VALID_ID = re.compile(rb"[A-Za-z0-9._:@/+=-]{1,128}")
#: The route label of a request no route matched (one label, not one per probed path).
UNMATCHED = "unmatched"


@dataclass
class RequestInfo:
    request_id: str
    key_id: str | None = None


class RequestContext:
    def __init__(self, app: ASGIApp, *, templates: Callable[[], list[str]]) -> None:
        self.app = app
        self.templates = templates
        self._matchers: list[tuple[re.Pattern[str], str]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = [value for name, value in scope["headers"] if name == HEADER]
        valid = len(given) == 1 and _VALID_ID.fullmatch(given[0]) is not None
        # an id is logged and echoed: one that holds a secret is refused like any other id
        leaked = valid and bool(find_secrets(given[0].decode("ascii")))
        info = RequestInfo(
            given[0].decode("ascii") if valid and not leaked else secrets.token_hex(16)
        )
        scope[CONTEXT_KEY] = info
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(n, v) for n, v in message.get("headers", []) if n != HEADER]
                headers.append((HEADER, info.request_id.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            if leaked:
                refusal = errors.envelope(
                    422,
                    "secret_detected",
                    "X-Request-Id looks like it holds a secret; send a random id instead",
                    {"field": "header.x-request-id"},
                )
                await refusal(scope, receive, send_with_id)
            elif given and not valid:
                refusal = errors.envelope(
                    422,
                    "invalid_request_id",
                    "X-Request-Id is one header of 1-128 characters: letters, digits and . _ : @"
                    " / + = -",
                    {"field": "header.x-request-id"},
                )
                await refusal(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = self.route_of(scope)
            metrics.observe_request(route, scope["method"], status, seconds)
            log.info(
                "%s %s %d",
                scope["method"],
                route,
                status,
                extra={
                    "request": {
                        "request_id": info.request_id,
                        "key_id": info.key_id,
                        "method": scope["method"],
                        "route": route,
                        "status": status,
                        "duration_ms": round(seconds * 1000, 3),
                    }
                },
            )

    def route_of(self, scope: Scope) -> str:
        """The template of the route that serves this path (the first that matches)."""
        if self._matchers is None:  # the first request: every route and mount is in place
            self._matchers = [(_pattern(t), t.rstrip("*")) for t in self.templates()]
        path: str = scope["path"]
        for pattern, template in self._matchers:
            if pattern.fullmatch(path):
                return template
        return UNMATCHED


def _pattern(template: str) -> re.Pattern[str]:
    """``/v1/memories/{memory_id}`` -> a pattern of the paths it serves; a template ending in
    ``*`` (a mount) serves everything under it."""
    mount = template.endswith("*")
    parts = re.split(r"\{[^}]+\}", template.rstrip("*"))
    body = "[^/]+".join(re.escape(p) for p in parts)
    return re.compile(body + ("(?:/.*)?" if mount else ""))


def note_principal(scope: Scope, key_id: str) -> None:
    """Name the key of the request's principal in its log line (the guard calls this)."""
    info = scope.get(CONTEXT_KEY)
    if isinstance(info, RequestInfo):
        info.key_id = key_id


def route_templates(app: FastAPI) -> list[str]:
    """Every path template the app serves: its OpenAPI paths, the docs pages, routes outside
    the schema (``/mcp``), each page of a mounted app (``/console/memories/{memory_id}``), and
    each mount as a prefix for the rest of what it serves (``/console*``)."""
    found = list(app.openapi().get("paths", {}))
    found += [p for p in (app.openapi_url, "/docs", "/redoc") if p]
    found += _routes(app.router.routes, "")
    return list(dict.fromkeys(found))


def _routes(routes: Sequence[BaseRoute], prefix: str) -> list[str]:
    found: list[str] = []
    for route in routes:
        if isinstance(route, Mount):
            inner = prefix + route.path
            if isinstance(route.app, FastAPI):  # a mounted app names its own pages
                declared = getattr(route.app.state, "route_templates", None)
                paths = declared or list(route.app.openapi().get("paths", {}))
                found += [inner + path for path in paths]
            found += _routes(route.routes, inner)
            found.append(f"{inner}*")
        elif isinstance(route, Route | WebSocketRoute):
            found.append(prefix + route.path)
    return found
