"""Starting `quipu serve` quickly (issue 23: ≤ 3 s to the first HTTP recall).

Three things made a start slow: the supervisor of ``--workers N`` built a whole server (every
import, the model, the runtime) only to close it and hand off to workers that built their
own; each worker imported the server (FastAPI, MCP, the routers: seconds on a busy machine)
and only then loaded the model, on the first recall. Now the supervisor only opens the store
(which migrates it) and checks the settings (:func:`prepare`), and each process starts
loading the model on a background thread before it imports the server (:func:`build_app`):
ONNX Runtime builds its session in native code, so the load overlaps the imports.

This module imports nothing heavy at its top: the supervisor and the worker factory
(:data:`WORKER_FACTORY`) start from here.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from quipu.errors import QuipuError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from quipu.runtime import Runtime
    from quipu.settings import Settings

#: The uvicorn factory of each `quipu serve --workers N` process (:func:`app_from_environment`).
WORKER_FACTORY = "quipu.surfaces.http.boot:app_from_environment"

#: The exit status uvicorn's supervisor reads as "this worker cannot start": it then stops the
#: server instead of starting the worker again (``uvicorn.config.STARTUP_FAILURE``).
STARTUP_FAILURE = 3

log = logging.getLogger("quipu.serve")


def prepare(settings: Settings) -> bool:
    """What the supervisor of ``--workers N`` does before it starts the workers: open the
    store once (which applies pending migrations, so the workers find it ready) and check
    the settings that need no model. Returns whether the store has any tenant (the banner's
    first-key hint). Raises the store's or the settings' :class:`QuipuError`."""
    from quipu.composition import build_store

    store = build_store(settings)
    try:
        return bool(store.list_tenants()) if settings.auth else True
    finally:
        store.close()


def build_app(settings: Settings) -> tuple[FastAPI, Runtime]:
    """The server of one process (:func:`~quipu.surfaces.http.server.build_server`), its
    model loading on a background thread while the server's modules import."""
    from quipu.embeddings.select import build_embedder, start_loading

    model = build_embedder(settings)
    start_loading(model)
    from quipu.surfaces.http.server import build_server

    return build_server(settings, embedder=model)


def app_from_environment() -> FastAPI:
    """The app of one worker process of `quipu serve --workers N` (a uvicorn factory).

    The parent resolved and checked the settings, ran the migrations and printed the start-up
    notes; each worker rebuilds the same server from the settings it was handed. Every worker
    runs its own job worker thread when ``worker_embedded`` is on: jobs are leased in the
    store, so several workers never run the same job twice. A worker that cannot build its
    server (a setting only the full server checks) exits with :data:`STARTUP_FAILURE`, so
    the supervisor stops instead of starting it again and again."""
    import atexit

    from quipu.composition import handed_settings
    from quipu.surfaces.http.logs import configure_logging

    settings = handed_settings()
    configure_logging(settings.log_level, settings.log_format)  # before MCP reaches for Rich
    try:
        app, runtime = build_app(settings)
    except QuipuError as exc:
        log.error("worker cannot start: %s: %s", exc.code, exc)
        sys.exit(STARTUP_FAILURE)
    if settings.worker_embedded:
        runtime.worker.start()
    atexit.register(runtime.close)
    return app
