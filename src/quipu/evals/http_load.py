"""HTTP load benchmark (`quipu bench http`): a real `quipu serve` in a child process, driven
from this process by an asyncio load generator over loopback."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

import quipu
from quipu.evals import perf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def prepare(path: Path, rows: int) -> None:
    """A store with ``rows`` memories in the local principal's agent scope."""
    mem = quipu.open(path)
    mem.import_(perf.synthetic_rows(mem, rows, [mem.principal.agent_id or "agent"]))
    mem.close()


def start_server(
    path: Path, port: int, log: Path, quota: int, workers: int | None = 1
) -> subprocess.Popen[bytes]:
    """``quipu serve`` on ``path`` with ``workers`` processes; ``quota`` lifts the live-row
    quota above what the run will write, so remember is measured, not the 429 of a full
    scope."""
    env = {**os.environ, "QUIPU_LOG_LEVEL": "warning", "QUIPU_QUOTA_PER_OWNER": str(quota)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "quipu", "serve", "--db", str(path), "--port", str(port)),
                *(("--workers", str(workers)) if workers is not None else ()),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not become healthy in 60 s")


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    """Send one HTTP/1.1 request on a kept-alive connection, read the whole response, return
    its status. Content-Length framing only: every Quipu response carries one."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _drive(
    url: str, concurrency: int, total: int, make: Callable[[int], tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """``concurrency`` kept-alive connections, each sending its next request as soon as the
    last answer is read, until ``total`` requests are done.

    A raw asyncio HTTP/1.1 client, not httpx: the load generator shares the two cores with
    the server, and httpx spent ~1.3 ms of CPU per request (this client: ~0.15 ms), time the
    server's own figures would otherwise pay for."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(total))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for i in counter:
                path, body = make(i)
                data = json.dumps(body).encode()
                request = (
                    f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
                ).encode() + data
                start = time.perf_counter()
                status = await asyncio.wait_for(_exchange(reader, writer, request), 30)
                latencies.append((time.perf_counter() - start) * 1000)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    return {
        "concurrency": concurrency,
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "latency_ms": perf.percentiles(latencies),
        "status_counts": {str(k): v for k, v in sorted(statuses.items())},
        "server_errors": sum(v for k, v in statuses.items() if k >= 500),
        "ok_responses": sum(v for k, v in statuses.items() if 200 <= k < 300),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process and its live descendants (``--workers``) have used
    so far (Linux /proc; 0.0 elsewhere)."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, CPU seconds)
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, (ppid, _) in stats.items() if ppid == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(stats[p][1] for p in tree if p in stats)


def established(pid: int, port: int) -> int:
    """Established TCP connections process ``pid`` holds on local ``port`` (Linux /proc;
    0 elsewhere)."""
    inodes = set()
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir() if fds.is_dir() else []:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        lines = Path(table).read_text().splitlines()[1:] if Path(table).exists() else []
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


def wait_for_workers(proc: subprocess.Popen[bytes], port: int, workers: int) -> None:
    """Return once ``workers`` server processes have each answered a connection (/healthz
    answers as soon as the first is up; the others may still be loading). Linux only; a
    no-op elsewhere and after 60 s."""
    if workers < 2 or not Path("/proc").is_dir():
        return
    answered: set[int] = set()
    deadline = time.monotonic() + 60
    while len(answered) < workers and time.monotonic() < deadline:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        pids = [int(p) for p in children.read_text().split()] if children.exists() else []
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode())
            conn.recv(64)
            answered.update(pid for pid in pids if established(pid, port))
        time.sleep(0.05)


def _measured(pid: int, drive: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``drive()``'s figures plus the CPU the server and this load generator spent per request
    (two cores are shared by both: a request's latency includes waiting for either)."""
    server, client = cpu_seconds(pid), time.process_time()
    result = drive()
    requests = max(int(result["requests"]), 1)
    result["server_cpu_ms_per_request"] = round((cpu_seconds(pid) - server) * 1000 / requests, 2)
    result["client_cpu_ms_per_request"] = round((time.process_time() - client) * 1000 / requests, 2)
    return result


def _recalls(url: str, level: int, requests: int, rng: random.Random) -> dict[str, Any]:
    return asyncio.run(
        _drive(
            url, level, requests, lambda _i: ("/v1/recall", {"query": perf.sentence(rng), "k": 10})
        )
    )


def run(
    workdir: Path,
    *,
    rows: int,
    requests: int,
    levels: list[int],
    workers: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """``workers``: passed to `quipu serve --workers`; None leaves serve's default, whose
    resolved count is reported."""
    from quipu.composition import load_settings, serve_settings

    overrides = {} if workers is None else {"workers": workers}
    count = serve_settings(load_settings(overrides, environ=dict(os.environ))).workers or 1
    path = workdir / "http.db"
    progress(f"loading {rows} memories")
    prepare(path, rows)
    port = free_port()
    proc = start_server(
        path,
        port,
        workdir / "server.log",
        quota=rows + requests + 1_000,
        workers=workers,
    )
    url = f"http://127.0.0.1:{port}"
    rng = random.Random(5)
    try:
        # warm the model and the scope index of every worker process before timing
        wait_for_workers(proc, port, count)
        httpx.post(f"{url}/v1/recall", json={"query": "warm up"}, timeout=60)
        _recalls(url, 2 * count, 20 * count, random.Random(0))
        recall = []
        for level in levels:
            progress(f"recall at concurrency {level}")
            recall.append(
                _measured(proc.pid, functools.partial(_recalls, url, level, requests, rng))
            )
        progress("remember at concurrency 8")
        remember = _measured(
            proc.pid,
            lambda: asyncio.run(
                _drive(
                    url,
                    8,
                    requests,
                    lambda i: ("/v1/memories", {"text": f"{perf.sentence(rng)} load {i}"}),
                )
            ),
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {
        "rows": rows,
        "server": f"quipu serve (uvicorn, {count} worker process{'es' if count > 1 else ''})",
        "workers": count,
        "workers_from": "serve's default" if workers is None else "--workers",
        "recall": recall,
        "remember": remember,
    }
