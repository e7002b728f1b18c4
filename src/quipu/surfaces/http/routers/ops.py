"""Operations (OPS-1): ``/readyz``, ``/metrics``, and the API docs served from bundled files.

``/docs`` is Swagger UI with its script and stylesheet served by this app from the files the
``fastapi-offline`` package ships (no CDN: the page works on a machine with no network), and
``/redoc`` likewise.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from quipu.memories import MemoryService
from quipu.surfaces import metrics
from quipu.surfaces.http.deps import service
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.responses import ReadyOut

router = APIRouter(tags=["operations"])
#: Where the bundled Swagger UI / ReDoc files are served.
STATIC = "/docs/static"
#: The text every readiness probe embeds: a short, fixed sentence (no caller input).
PROBE_TEXT = "readiness probe"


@router.get(
    "/readyz",
    summary="Readiness: the store answers and the embedding model embeds (503 otherwise)",
    response_model=ReadyOut,
    responses={503: {"description": "Not ready; `checks` says which part failed"}},
)
async def readyz(svc: Annotated[MemoryService, Depends(service)]) -> SafeJSONResponse:
    """Unlike ``/healthz`` (the process is up), this touches the store (one read) and runs the
    embedding model once, so a load balancer sends traffic only to a worker that can serve."""
    checks: dict[str, Any] = {}
    checks["store"] = await run_in_threadpool(_check_store, svc)
    checks["embedder"] = await run_in_threadpool(_check_embedder, svc)
    ready = all(c["ok"] for c in checks.values())
    return SafeJSONResponse(
        {"status": "ready" if ready else "unavailable", "checks": checks},
        status_code=200 if ready else 503,
    )


def _check_store(svc: MemoryService) -> dict[str, Any]:
    try:
        svc.store.get_tenant("readiness-probe")  # one indexed read
    except Exception as exc:  # any driver failure means not ready; the probe reports its type
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "backend": svc.store.capabilities.backend}


def _check_embedder(svc: MemoryService) -> dict[str, Any]:
    if svc.embedder is None:
        return {"ok": True, "model": None, "note": "no embedder configured: keyword search only"}
    try:
        svc.embedder.embed_query(PROBE_TEXT)
    except Exception as exc:  # a model that cannot embed is not ready, whatever it raised
        return {"ok": False, "model": svc.embedder.model_id, "error": type(exc).__name__}
    return {"ok": True, "model": svc.embedder.model_id}


@router.get(
    "/metrics",
    summary="Prometheus metrics (text exposition format)",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def prometheus(request: Request) -> Response:
    svc: MemoryService = request.app.state.service
    body = await run_in_threadpool(metrics.render, svc.store)
    return Response(body, media_type=metrics.CONTENT_TYPE)


def install_docs(app: FastAPI) -> None:
    """``/docs`` and ``/redoc`` from the bundled files (the app is made with both off)."""
    bundled = files("fastapi_offline") / "static"
    app.mount(STATIC, StaticFiles(directory=str(bundled)), name="docs-static")
    title = f"{app.title} API"

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            redoc_js_url=f"{STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC}/favicon.png",
            with_google_fonts=False,
        )
