"""`quipu serve --workers N`: several processes behind one port, keep-alive without Nagle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from quipu.evals.http_load import established, free_port, wait_for_workers
from quipu.surfaces.http.workers import listening_socket
from tests.conftest import PG_URL


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_workers_listening_socket_gives_accepted_connections_tcp_nodelay(host: str) -> None:
    """What `quipu serve --workers N` promises: every connection its shared listening socket
    accepts has Nagle's algorithm off, whatever the installed uvicorn's own socket does (older
    releases bound it with protocol 0, so asyncio left Nagle on: uvicorn issue #3149)."""
    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")

    async def nodelay_of(listener: socket.socket) -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listener)
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection(host, port)
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
            server.close()

    try:
        config = uvicorn.Config("x:y", host=host, port=free_port())
        listener = listening_socket(config)
    except (OSError, SystemExit):
        pytest.skip(f"cannot bind {host} here")
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(nodelay_of(listener)) == 1


@contextlib.contextmanager
def _serve_two_workers(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    # (the log is tmp_path / "serve.log")
    """`quipu serve --workers 2` on a free loopback port, healthy; stopped with SIGINT."""
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
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        yield proc, port
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise


def _workers(proc: subprocess.Popen[bytes]) -> list[int]:
    return [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]


def test_serve_with_two_workers_answers_from_both_processes(tmp_path: Path) -> None:
    with _serve_two_workers(tmp_path) as (proc, port):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            made = client.post("/v1/memories", json={"text": "Dana prefers window seats"})
            assert made.status_code == 201, made.text
            # Any worker answers, each from the same store: a write in one is read by both.
            for _ in range(6):
                found = client.post("/v1/recall", json={"query": "where does Dana sit?"})
                assert found.status_code == 200
                assert found.json()["results"][0]["text"] == "Dana prefers window seats"
        assert len(_workers(proc)) >= 2  # the supervisor's worker processes


def test_two_workers_share_connections_opened_together(tmp_path: Path) -> None:
    """Eight kept-alive connections opened at once are spread over both workers, not taken
    by whichever woke first (SharedAcceptLoop; with asyncio's own loop one worker took
    nearly all of them and two workers served no more than one)."""

    async def hold_connections(port: int) -> list[int]:
        opened = await asyncio.gather(
            *(asyncio.open_connection("127.0.0.1", port) for _ in range(8))
        )
        request = f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode()
        for reader, writer in opened:
            writer.write(request)
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        counts = [established(pid, port) for pid in _workers(proc)]
        for _, writer in opened:
            writer.close()
        return counts

    with _serve_two_workers(tmp_path) as (proc, port):
        wait_for_workers(proc, port, 2)
        tries = []
        for _ in range(3):  # a loaded machine can delay a sibling's wake-up now and then
            counts = asyncio.run(hold_connections(port))
            tries.append(counts)
            # (the supervisor may have a helper child besides the two workers, holding none)
            if sum(counts) == 8 and sorted(counts)[-2] >= 3:
                break
            time.sleep(0.5)  # let the closed connections drain before the next try
    assert sum(counts) == 8 and sorted(counts)[-2] >= 3, tries


def test_ops_001_a_killed_worker_is_replaced_with_its_reason_logged(tmp_path: Path) -> None:
    """Issue 27: uvicorn said only "Child process died"; the supervisor now says why."""
    with _serve_two_workers(tmp_path) as (proc, port):
        wait_for_workers(proc, port, 2)
        victim = next(
            pid
            for pid in _workers(proc)
            if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
        os.kill(victim, signal.SIGKILL)
        log = tmp_path / "serve.log"
        # the supervisor checks each worker in turn, waiting up to 60 s for a live one's answer
        deadline = time.monotonic() + 90
        while f"worker {victim} was killed by SIGKILL" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert "out-of-memory" in log.read_text()


def test_ops_001_metrics_cover_every_worker(tmp_path: Path) -> None:
    """With --workers 2 the workers share one metrics directory: after requests answered by
    both processes, one scrape counts them all (each worker alone would count its share)."""
    with _serve_two_workers(tmp_path) as (proc, port):
        wait_for_workers(proc, port, 2)
        total = 12
        for _ in range(total):  # a new connection each: the workers take turns accepting
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code == 200
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        line = next(
            row
            for row in text.splitlines()
            if row.startswith("quipu_http_requests_total{")
            and 'route="/healthz"' in row
            and 'code="200"' in row
        )
        assert float(line.rsplit(" ", 1)[1]) >= total


@pytest.mark.postgres
def test_ops_001_the_banner_and_hints_never_print_the_password(tmp_path: Path) -> None:
    """Issue 27: `quipu serve` on a DSN with a password prints the banner and the first-key
    hints with the password masked, as a real process (the test server trusts any password)."""
    if PG_URL is None or "://postgres@" not in PG_URL:
        pytest.skip("needs the test PostgreSQL server (scripts/with-testdb.sh)")
    from tests.support.pg import drop_schema, new_schema, schema_url

    schema = new_schema(PG_URL, f"t_banner_{uuid.uuid4().hex[:10]}")
    url = schema_url(PG_URL.replace("://postgres@", "://postgres:hunter2-banner@", 1), schema)
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "QUIPU_LOG_LEVEL": "warning", "QUIPU_EMBEDDER": "none"}
    try:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "quipu",
                    "serve",
                    "--auth",
                    "--db",
                    url,
                    "--port",
                    str(port),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            deadline = time.monotonic() + 60
            while "No tenants or keys yet" not in log.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        shown = log.read_text()
        assert "hunter2" not in shown, shown
        assert shown.count("postgres:***@") == 3  # the banner and both hints
    finally:
        drop_schema(PG_URL, schema)
