"""Mapping every failure to the error envelope of API-2; nothing escapes as a bare 500."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from quipu.errors import LimitExceeded, QuipuError

log = logging.getLogger("quipu.http")


def envelope(status: int, code: str, message: str, details: object = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "details": details or {}}}, status_code=status
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(QuipuError)
    async def quipu_error(_: Request, exc: QuipuError) -> JSONResponse:
        response = envelope(exc.status, exc.code, exc.message, exc.details)
        if isinstance(exc, LimitExceeded) and exc.retry_after is not None:
            response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"field": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
            for e in exc.errors()
        ]
        return envelope(
            422, "invalid_request", "the request does not match the API", {"problems": problems}
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's own body-parsing failure (e.g. bytes that are not UTF-8): same class of
            # problem as malformed JSON, so the same answer.
            return envelope(422, "invalid_request", f"the request body is unreadable: {exc.detail}")
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        response = envelope(exc.status_code, code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return envelope(500, "internal_error", "the server failed; the error was logged")
