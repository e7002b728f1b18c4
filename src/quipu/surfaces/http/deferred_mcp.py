"""MCP at ``/mcp`` of the server `quipu serve` runs, built after the app starts (issue 23).

Importing the MCP SDK (hundreds of pydantic models) was about 60 % of the CPU a server process
spent importing before it could answer anything. Here the route is mounted at once and the
MCP server is imported and built, on a thread, by the first MCP request a process receives
(the HTTP API keeps answering meanwhile); that request and any arriving while it is built
wait for it (up to :data:`READY_WAIT_S`), then are answered as
:func:`~quipu.surfaces.mcp.mount_mcp` answers them. Built in the background at start-up
instead, the import held the interpreter lock against the first requests: on a loaded
machine a worker's ``/healthz`` then took over 5 s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from quipu.surfaces.http.errors import envelope

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from quipu.surfaces.mcp.http import Endpoint

#: How long an MCP request waits for the endpoint still being built when it arrives.
READY_WAIT_S = 120.0

log = logging.getLogger("quipu.mcp")


class DeferredEndpoint:
    """The ``/mcp`` route: forwards to the endpoint ``build`` returns, built on a thread by the
    first MCP request after the lifespan starts and running until the lifespan ends."""

    def __init__(self, build: Callable[[], Endpoint]) -> None:
        self._build = build
        self._endpoint: Endpoint | None = None
        self._stop: asyncio.Event | None = None  # set while the lifespan runs
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        stop = self._stop = asyncio.Event()
        try:
            yield
        finally:
            stop.set()
            self._stop = None
            if self._task is not None:
                await self._task
            self._task = self._ready = None

    async def _serve(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        try:
            endpoint = await anyio.to_thread.run_sync(self._build)
            async with endpoint.running():
                self._endpoint = endpoint
                ready.set()
                await stop.wait()
        except Exception:  # the API keeps serving; MCP requests are answered 503
            log.exception("the MCP endpoint could not start")
        finally:
            self._endpoint = None
            ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stop = self._stop
        if self._endpoint is None and stop is not None:
            if self._task is None:  # the first MCP request: build the endpoint now
                self._ready = asyncio.Event()
                self._task = asyncio.create_task(self._serve(self._ready, stop))
            if self._ready is not None:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._ready.wait(), READY_WAIT_S)
        endpoint = self._endpoint
        if endpoint is None:
            response = envelope(503, "unavailable", "the MCP endpoint is not running")
            await response(scope, receive, send)
            return
        await endpoint.app(scope, receive, send)


def mount_mcp_deferred(
    app: Starlette, build: Callable[[], Endpoint], *, path: str = "/mcp"
) -> DeferredEndpoint:
    """Mount at ``path`` of ``app`` the MCP endpoint ``build`` returns (a call of
    :func:`~quipu.surfaces.mcp.http.mcp_endpoint`), built once the app's lifespan starts."""
    deferred = DeferredEndpoint(build)
    app.router.routes.append(Route(path, endpoint=deferred))
    previous = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(outer: Any) -> AsyncIterator[Any]:
        async with deferred.running(), previous(outer) as state:
            yield state

    app.router.lifespan_context = lifespan
    return deferred
