"""Measure the transport under hostile requests (issue 20, defects 1 and 3): a real
``quipu serve --auth --workers 1`` on a fresh SQLite store, spoken to over raw sockets.

    python scripts/probe_transport.py chunked --mib 1024   # server RSS under a chunked POST
    python scripts/probe_transport.py deep --depth 900     # a deep body vs /healthz latency
    python scripts/probe_transport.py explode              # a 500 from a RecursionError vs
                                                            # /healthz latency (in process)

Prints one JSON object. Nothing here is asserted: tests check behaviour, this measures it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_kib(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            name, value = line.split(":")
            found[name] = int(value.split()[0])
    return found


class Server:
    """``quipu serve --auth`` with one admin key, embedder off (nothing here recalls)."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="quipu-probe-")
        db = f"{self.dir}/probe.db"
        env = {**os.environ, "QUIPU_EMBEDDER": "none"}
        quipu = str(BIN / "quipu")
        subprocess.run(
            [quipu, "tenants", "create", "acme", "--db", db],
            env=env,
            check=True,
            capture_output=True,
        )
        made = subprocess.run(
            [
                quipu,
                "keys",
                "create",
                "--tenant",
                "acme",
                "--role",
                "admin",
                "--agent-id",
                "a1",
                "--db",
                db,
                "--json",
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        self.key = json.loads(made.stdout)["secret"]
        self.port = free_port()
        self.log = open(f"{self.dir}/server.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [quipu, "serve", "--auth", "--db", db, "--port", str(self.port), "--workers", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def chunked_post(port: int, mib: int, auth: str | None) -> dict[str, Any]:
    """POST ``mib`` MiB as 1 MiB chunks, never the final chunk unless all were sent; stop as
    soon as the server answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = (
        "POST /v1/memories HTTP/1.1\r\nHost: probe\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n"
    )
    if auth:
        head += f"Authorization: Bearer {auth}\r\n"
    sock.sendall((head + "\r\n").encode())
    data = b'{"text": "' + b"a" * (1 << 20)
    piece = f"{len(data):x}\r\n".encode() + data + b"\r\n"
    start, sent, answer = time.monotonic(), 0, b""
    try:
        for _ in range(mib):
            sock.setblocking(False)
            try:
                answer = sock.recv(256)
            except BlockingIOError:
                answer = b""
            sock.settimeout(60)
            if answer:
                break
            sock.sendall(piece)
            sent += 1
        else:
            sock.sendall(b'2\r\n"}\r\n0\r\n\r\n')  # close the JSON string, end the body
    except OSError:
        pass  # the server answered and closed
    if not answer:
        try:
            answer = sock.recv(256)
        except OSError:
            answer = b""
    sock.close()
    return {
        "sent_mib": sent,
        "seconds": round(time.monotonic() - start, 3),
        "status_line": answer.split(b"\r\n", 1)[0].decode("latin-1"),
    }


def watch_health(port: int, busy: threading.Thread) -> float:
    """The slowest /healthz while ``busy`` runs (seconds)."""
    worst = 0.0
    while busy.is_alive():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        began = time.monotonic()
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        worst = max(worst, time.monotonic() - began)
        conn.close()
        time.sleep(0.01)
    return worst


def timed_request(
    port: int,
    method: str,
    path: str,
    body: str | None,
    headers: dict[str, str],
    out: dict[str, Any],
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    began = time.monotonic()
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    out.update(
        status=response.status,
        body=response.read()[:160].decode("utf-8", "replace"),
        seconds=round(time.monotonic() - began, 3),
    )


def probe_chunked(mib: int) -> dict[str, Any]:
    server = Server()
    try:
        before = memory_kib(server.proc.pid)
        without = chunked_post(server.port, mib, None)
        after_without = memory_kib(server.proc.pid)
        with_auth = chunked_post(server.port, mib, server.key)
        after_with = memory_kib(server.proc.pid)
    finally:
        server.stop()
    return {
        "mib": mib,
        "rss_kib_before": before,
        "no_credential": without,
        "rss_kib_after_no_credential": after_without,
        "with_credential": with_auth,
        "rss_kib_after_with_credential": after_with,
    }


def probe_deep(depth: int) -> dict[str, Any]:
    server = Server()
    metadata = '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    body = '{"text": "deep probe", "metadata": ' + metadata + "}"
    headers = {"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"}
    result: dict[str, Any] = {}
    try:
        busy = threading.Thread(
            target=timed_request, args=(server.port, "POST", "/v1/memories", body, headers, result)
        )
        busy.start()
        worst = watch_health(server.port, busy)
        busy.join()
    finally:
        server.stop()
    return {"depth": depth, "post": result, "worst_healthz_seconds": round(worst, 3)}


def probe_explode() -> dict[str, Any]:
    """The app `quipu serve` builds (with whatever logging its parts install), plus one route
    whose recursive walk of a 900-deep value fails with a RecursionError (alternating frames,
    a traceback that does not collapse), on a real uvicorn server."""
    from tests.support.live_server import LiveServer

    from quipu.composition import build_server, load_settings

    settings = load_settings(
        {"database": f"{tempfile.mkdtemp()}/e.db", "embedder": "none"}, environ={}
    )
    app, runtime = build_server(settings)

    def flatten(value: object) -> str:  # the shape of the walk that failed in issue 20
        if isinstance(value, dict):
            return "\n".join(f"{k}={flatten(v)}" for k, v in value.items())
        return str(value)

    deep: dict[str, Any] = {}
    for _ in range(900):
        deep = {"a": deep}

    @app.get("/v1/explode")
    def explode() -> str:
        return flatten(deep)

    # Routes are matched in order: move the new one ahead of /mcp's catch-all mount, if any.
    app.router.routes.insert(0, app.router.routes.pop())
    server = LiveServer(app)
    result: dict[str, Any] = {}
    try:
        busy = threading.Thread(
            target=timed_request, args=(server.port, "GET", "/v1/explode", None, {}, result)
        )
        busy.start()
        worst = watch_health(server.port, busy)
        busy.join()
    finally:
        server.close()
        runtime.close()
    return {"explode": result, "worst_healthz_seconds": round(worst, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("probe", choices=["chunked", "deep", "explode"])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=900)
    args = parser.parse_args()
    if args.probe == "chunked":
        print(json.dumps(probe_chunked(args.mib), indent=2))
    elif args.probe == "deep":
        print(json.dumps(probe_deep(args.depth), indent=2))
    else:
        print(json.dumps(probe_explode(), indent=2))


if __name__ == "__main__":
    main()
