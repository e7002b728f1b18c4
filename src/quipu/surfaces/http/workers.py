"""`quipu serve --workers N`: uvicorn's multi-process supervisor, with TCP_NODELAY kept.

uvicorn binds the shared listening socket itself for its workers and leaves its protocol
number at 0; asyncio only turns Nagle's algorithm off (TCP_NODELAY) on accepted sockets whose
protocol reads IPPROTO_TCP, so every keep-alive request after the first waited ~44 ms for the
client's delayed ACK (measured here: /healthz 1.6 ms with one process, 44 ms with two;
uvicorn issue #3149). The socket is re-wrapped with its protocol named before the workers
start.
"""

from __future__ import annotations

import socket

import uvicorn
from uvicorn.supervisors import Multiprocess


def run_workers(factory: str, *, workers: int, host: str, port: int, log_level: str) -> None:
    """Serve the app ``factory`` (``module:function``) from ``workers`` processes; returns
    when the supervisor stops (SIGINT/SIGTERM)."""
    config = uvicorn.Config(
        factory, factory=True, workers=workers, host=host, port=port, log_level=log_level
    )
    Multiprocess(config, sockets=[listening_socket(config)]).run()


def listening_socket(config: uvicorn.Config) -> socket.socket:
    """uvicorn's bound listening socket, re-wrapped with its protocol named (IPPROTO_TCP), so
    the sockets it accepts get TCP_NODELAY from asyncio."""
    bound = config.bind_socket()
    if bound.family not in (socket.AF_INET, socket.AF_INET6):
        return bound  # a Unix socket has no Nagle's algorithm to turn off
    return socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())
