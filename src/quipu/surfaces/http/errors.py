"""Mapping every failure to the error envelope of API-2; nothing escapes as a bare 500.

An unexpected exception is answered 500 ``internal_error`` by the handler below, then logged
once by :class:`ContainFailures` as a bounded summary (type, message, the first and last
frames), never as a full rendered traceback: a RecursionError's thousand frames, rendered on
the event loop, stalled every other request for 15-20 s (issue 20 defect 3).
"""

from __future__ import annotations

import logging
import math
import traceback
from types import TracebackType

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from quipu.errors import LimitExceeded, QuipuError
from quipu.surfaces import metrics
from quipu.surfaces.http.encoding import SafeJSONResponse, clean_text

log = logging.getLogger("quipu.http")

#: Frames of a traceback kept in the log: where the request entered, and where it failed.
HEAD_FRAMES, TAIL_FRAMES = 6, 10
MAX_MESSAGE_CHARS = 500


def envelope(status: int, code: str, message: str, details: object = None) -> SafeJSONResponse:
    metrics.observe_refusal(code, "http")
    return SafeJSONResponse(
        {"error": {"code": code, "message": message, "details": details or {}}}, status_code=status
    )


def error_response(exc: QuipuError) -> Response:
    """A typed error as its envelope, with the headers its status calls for."""
    response = envelope(exc.status, exc.code, exc.message, exc.details)
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, LimitExceeded) and exc.retry_after is not None:
        # whole seconds, rounded up: a client that waits what it is told is not refused again
        response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return response


def install(app: FastAPI) -> None:
    @app.exception_handler(QuipuError)
    async def quipu_error(_: Request, exc: QuipuError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> Response:
        problems = [
            {"field": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
            for e in exc.errors()
        ]
        return envelope(
            422, "invalid_request", "the request does not match the API", {"problems": problems}
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400:
            # FastAPI's own body-parsing failure (e.g. bytes that are not UTF-8): same class of
            # problem as malformed JSON, so the same answer.
            return envelope(422, "invalid_request", f"the request body is unreadable: {exc.detail}")
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status_code, "http_error"
        )
        response = envelope(exc.status_code, code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Response:
        # Logged by ContainFailures, once the answer is out.
        return envelope(500, "internal_error", "the server failed; the error was logged")


class ContainFailures:
    """Outermost layer: Starlette re-raises an unexpected exception after its 500 went out so
    that servers can log it; uvicorn would then render the whole traceback on the event loop
    and close the connection. Here it is logged as a bounded summary and goes no further."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            log.error(
                "%s %s failed (answered 500 internal_error): %s",
                scope.get("method"),
                scope.get("path"),
                summarize(exc),
            )


def summarize(exc: BaseException) -> str:
    """The exception, its cause, and at most HEAD_FRAMES + TAIL_FRAMES frames, as plain text:
    cheap to build and to log however deep the stack was."""
    lines = [_headline(exc)]
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        lines.append(f"  caused by {_headline(cause)}")
    entries = _tb_entries(exc.__traceback__)
    shown = entries
    if len(entries) > HEAD_FRAMES + TAIL_FRAMES:
        shown = entries[:HEAD_FRAMES] + entries[-TAIL_FRAMES:]
    summary = traceback.StackSummary.extract(
        ((tb.tb_frame, tb.tb_lineno) for tb in shown), capture_locals=False
    )
    frames = [f"  {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in summary]
    if len(shown) < len(entries):
        frames.insert(HEAD_FRAMES, f"  ... {len(entries) - len(shown)} frames omitted ...")
    return "\n".join(lines + frames)


def _headline(exc: BaseException) -> str:
    message = clean_text(str(exc))
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    return f"{type(exc).__name__}: {message}"


def _tb_entries(tb: TracebackType | None) -> list[TracebackType]:
    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    return entries
