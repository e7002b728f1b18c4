"""`quipu serve --workers N`: uvicorn's multi-process supervisor, with TCP_NODELAY kept.

uvicorn binds the shared listening socket itself for its workers and leaves its protocol
number at 0; asyncio only turns Nagle's algorithm off (TCP_NODELAY) on accepted sockets whose
protocol reads IPPROTO_TCP, so every keep-alive request after the first waited ~44 ms for the
client's delayed ACK (measured here: /healthz 1.6 ms with one process, 44 ms with two;
uvicorn issue #3149). The socket is re-wrapped with its protocol named before the workers
start.

The workers share that socket, and asyncio accepts every pending connection in one go: when
a client opens its kept-alive connections together, the first worker to wake takes most of
them and the other idles (measured: 8 connections, recall at 130 requests/s with two
workers, the same as one). Each worker therefore runs :class:`SharedAcceptLoop`, which
accepts one connection and then steps away from the socket for half a millisecond, so a
sibling takes the next one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess
from uvicorn.supervisors.multiprocess import Process

from quipu.surfaces.http.logs import log_config
from quipu.surfaces.metrics import MULTIPROCESS_ENV

log = logging.getLogger("quipu.workers")

#: How long a worker leaves the shared socket to its siblings after accepting a connection.
ACCEPT_PAUSE_S = 0.0005


class SharedAcceptLoop(asyncio.SelectorEventLoop):
    """An event loop for one of several processes accepting on one socket: one connection
    per turn, then a short pause, so connections opened together spread over the workers
    (a busy worker, slower back to the socket, takes fewer). At most one accept per pause
    per worker: ~2,000 new connections per second each, far above what kept-alive agents
    open."""

    def _accept_connection(
        self,
        protocol_factory: Any,
        sock: socket.socket,
        sslcontext: Any = None,
        server: Any = None,
        backlog: int = 100,
        *args: Any,
    ) -> None:
        super()._accept_connection(  # type: ignore[misc]
            protocol_factory, sock, sslcontext, server, 1, *args
        )
        if not _listening(sock, server):
            return
        self._remove_reader(sock.fileno())  # type: ignore[attr-defined]
        self.call_later(
            ACCEPT_PAUSE_S,
            self._resume_accepting,
            (protocol_factory, sock, sslcontext, server, backlog, *args),
        )

    def _resume_accepting(self, accept_args: tuple[Any, ...]) -> None:
        sock, server = accept_args[1], accept_args[3]
        if _listening(sock, server):
            self._add_reader(  # type: ignore[attr-defined]
                sock.fileno(), self._accept_connection, *accept_args
            )


def _listening(sock: socket.socket, server: Any) -> bool:
    """The socket is open and its server has not been closed meanwhile."""
    return sock.fileno() >= 0 and (server is None or server.is_serving())


#: How long a worker may take to answer the supervisor before it is deemed hung and replaced.
WORKER_HEALTHCHECK_SECONDS = 60


class Supervisor(Multiprocess):
    """uvicorn's supervisor, saying why it replaces a worker (issue 27): uvicorn logs only
    "Child process [pid] died", whether the worker exited, was killed by a signal (the
    out-of-memory killer's SIGKILL) or stopped answering the health check and was killed."""

    #: A worker exited as unable to start (uvicorn's STARTUP_FAILURE), which stopped the server.
    failed = False

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            running = process.process.is_alive()
            if running and answers(process, self.config.timeout_worker_healthcheck):
                continue
            # a worker that died while the ping waited was not hung: say what ended it
            running = running and process.process.is_alive()
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                log.error("worker %s failed to start; stopping the server", process.pid)
                self.failed = True
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            log.error("worker %s %s; starting a new one", process.pid, why(running, process))
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self.processes[index] = replacement


def answers(process: Process, timeout: float) -> bool:
    """Whether the worker answers the supervisor's ping within ``timeout``; False as soon as it
    exits. uvicorn's own ping waits on the pipe alone, and the supervisor holds both of its
    ends, so a worker that exits while a ping waits (one leaving as a startup failure, one
    killed) was seen only when the whole health-check timeout ran out: `quipu serve` took a
    minute to stop after a worker could not start."""
    try:
        process.parent_conn.send(b"ping")
        ready = wait([process.parent_conn, process.process.sentinel], timeout)
        if process.parent_conn not in ready:
            return False
        process.parent_conn.recv()
    except (OSError, EOFError, pickle.UnpicklingError):
        return False
    return True


def why(was_running: bool, process: Process) -> str:
    """The reason a worker is being replaced, in words."""
    if was_running:
        return (
            f"did not answer the supervisor's health check within "
            f"{WORKER_HEALTHCHECK_SECONDS} s (hung or starved of CPU) and was killed"
        )
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (often the out-of-memory killer)" if name == "SIGKILL" else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {code}"


@contextmanager
def share_metrics() -> Iterator[None]:
    """Worker processes started inside write their metrics to one fresh directory
    (prometheus-client's multiprocess mode), so any worker's ``/metrics`` reports them all;
    the directory is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="quipu-metrics-") as folder:
        before = os.environ.get(MULTIPROCESS_ENV)
        os.environ[MULTIPROCESS_ENV] = folder
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(MULTIPROCESS_ENV, None)
            else:
                os.environ[MULTIPROCESS_ENV] = before


def run_workers(
    factory: str, *, workers: int, host: str, port: int, log_level: str, log_format: str = "json"
) -> bool:
    """Serve the app ``factory`` (``module:function``) from ``workers`` processes; returns
    when the supervisor stops (SIGINT/SIGTERM): True, or False when it stopped because a
    worker could not start."""
    config = uvicorn.Config(
        factory,
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_config=log_config(log_level, log_format),
        # A worker answers the supervisor's pings from a thread that competes with loading the
        # model and the app; on a busy machine 5 s (uvicorn's default) killed healthy workers
        # mid-start ("Child process died", no reason logged).
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
        loop=f"{__name__}:SharedAcceptLoop",
    )
    supervisor = Supervisor(config, sockets=[listening_socket(config)])
    supervisor.run()
    return not supervisor.failed


def listening_socket(config: uvicorn.Config) -> socket.socket:
    """uvicorn's bound listening socket, re-wrapped with its protocol named (IPPROTO_TCP), so
    the sockets it accepts get TCP_NODELAY from asyncio."""
    bound = config.bind_socket()
    if bound.family not in (socket.AF_INET, socket.AF_INET6):
        return bound  # a Unix socket has no Nagle's algorithm to turn off
    return socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())
