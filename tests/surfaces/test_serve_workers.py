"""`quipu serve --workers N`: several processes behind one port, keep-alive without Nagle."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import uvicorn

from quipu.evals.http_load import free_port
from quipu.surfaces.http.workers import listening_socket


def test_the_workers_listening_socket_gives_accepted_connections_tcp_nodelay() -> None:
    """uvicorn's own bound socket reports protocol 0, so asyncio leaves Nagle's algorithm on
    for every connection it accepts (uvicorn issue #3149); ours names IPPROTO_TCP."""

    async def nodelay_of(listener: socket.socket) -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listener)
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
            server.close()

    config = uvicorn.Config("x:y", host="127.0.0.1", port=free_port())
    assert asyncio.run(nodelay_of(listening_socket(config))) == 1
    plain = uvicorn.Config("x:y", host="127.0.0.1", port=free_port()).bind_socket()
    assert asyncio.run(nodelay_of(plain)) == 0  # what the fix is for


def test_serve_with_two_workers_answers_from_both_processes(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "QUIPU_LOG_LEVEL": "warning", "QUIPU_WORKER_EMBEDDED": "false"}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "quipu", "serve", "--db", str(tmp_path / "w.db")),
                *("--port", str(port), "--workers", "2"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30) as client:
            made = client.post("/v1/memories", json={"text": "Dana prefers window seats"})
            assert made.status_code == 201, made.text
            # Any worker answers, each from the same store: a write in one is read by both.
            for _ in range(6):
                found = client.post("/v1/recall", json={"query": "where does Dana sit?"})
                assert found.status_code == 200
                assert found.json()["results"][0]["memory"]["text"] == "Dana prefers window seats"
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) >= 2  # the supervisor's worker processes
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
