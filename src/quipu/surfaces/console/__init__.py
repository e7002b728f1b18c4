"""The operator console (OPS-4): server-rendered pages served by `quipu serve --auth` under
``/console``, signed in with an admin or superadmin key. Jinja2 templates and one CSS file
ship inside the package; no script, no CDN, works offline. docs/console.md."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from quipu.auth.access import Access
from quipu.errors import QuipuError
from quipu.runtime import Runtime
from quipu.surfaces.console import actions, graph, pages, planes
from quipu.surfaces.console.sessions import SessionSigner
from quipu.surfaces.console.web import (
    COOKIE,
    HERE,
    SECURITY_HEADERS,
    SignInNeeded,
    build_console_state,
    cookie_args,
    operator,
    redirect,
    render,
)

#: Where `quipu serve` mounts the console.
CONSOLE_PATH = "/console"

__all__ = ["CONSOLE_PATH", "create_console"]


def create_console(
    runtime: Runtime, access: Access, signer: SessionSigner | None = None
) -> FastAPI:
    """The console as an app of its own, to mount at :data:`CONSOLE_PATH`."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = build_console_state(runtime, access, signer or SessionSigner())
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    routers = (pages.router, actions.router, planes.router, graph.router)
    for router in routers:
        app.include_router(router)
    # the page templates /metrics labels requests with (a made-up path is "unmatched")
    app.state.route_templates = [
        r.path for router in routers for r in router.routes if isinstance(r, APIRoute)
    ]

    @app.exception_handler(SignInNeeded)
    async def signed_out(request: Request, _exc: SignInNeeded) -> Response:
        if request.method == "GET":
            return redirect(request, "/sign-in")
        return render(
            request,
            "error.html",
            {"status": 401, "code": "unauthorized", "message": "Sign in to the console first."},
            status=401,
        )

    @app.exception_handler(QuipuError)
    async def refused(request: Request, exc: QuipuError) -> HTMLResponse:
        try:
            who = await run_in_threadpool(operator, request)
        except SignInNeeded:
            who = None
        context = {"status": exc.status, "code": exc.code, "message": exc.message}
        return render(request, "error.html", context, who=who, status=exc.status)

    @app.middleware("http")
    async def headers(request: Request, call_next: object) -> Response:
        answer: Response = await call_next(request)  # type: ignore[operator]
        for name, value in SECURITY_HEADERS.items():
            answer.headers.setdefault(name, value)
        renewed = getattr(request.state, "console_cookie", None)
        if renewed:  # the session's cookie, re-signed with this request's time
            answer.set_cookie(COOKIE, renewed, **cookie_args(request))
        return answer

    return app
