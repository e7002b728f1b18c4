"""`quipu serve` start-up (issue 23: ≤ 3 s to the first HTTP recall): the supervisor of
``--workers N`` readies the store without building a server, a server process imports the MCP
SDK only when ``/mcp`` is first called, and a worker that cannot build its server stops the
whole server with a clear exit instead of being restarted forever."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from quipu.evals.http_load import free_port

#: A hang guard for a subprocess, not a speed assertion.
WAIT_S = 240

SUPERVISOR = """
import json, sys
import quipu.surfaces.http.workers as workers
def stand_in(factory, **options):  # the supervisor's hand-off: report what was loaded
    heavy = ("fastapi", "mcp", "onnxruntime", "quipu.surfaces.http.server")
    print(json.dumps({"factory": factory, "loaded": [m for m in heavy if m in sys.modules]}))
    return True
workers.run_workers = stand_in
from quipu.surfaces.cli.app import app
app(["serve", "--db", sys.argv[1], "--workers", "2", "--port", "1"], standalone_mode=False)
"""

FIRST_MCP_CALL = """
import json, sys
from fastapi.testclient import TestClient
from quipu.settings import Settings
from quipu.surfaces.http.server import build_server
before = "mcp" in sys.modules
app, runtime = build_server(Settings(database=sys.argv[1], embedder="none"))
initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}
headers = {"Accept": "application/json, text/event-stream", "Host": "127.0.0.1:8750"}
with TestClient(app, base_url="http://127.0.0.1:8750") as client:
    healthy = client.get("/healthz").status_code
    after_start = "mcp" in sys.modules
    answer = client.post("/mcp", json=initialize, headers=headers)
runtime.close()
print(json.dumps({"before": before, "after_start": after_start, "healthy": healthy,
                  "status": answer.status_code, "body": answer.json(), "after": "mcp" in sys.modules}))
"""


def _run(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        check=False,
        text=True,
        timeout=WAIT_S,
        env={**os.environ, "QUIPU_LOG_LEVEL": "warning", "QUIPU_WORKER_EMBEDDED": "false"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_ops_001_issue23_the_supervisor_readies_the_store_without_building_a_server(
    tmp_path: Path,
) -> None:
    """Before: the supervisor built a whole server (FastAPI, MCP, routers, runtime), closed it
    and handed off to workers that built their own: its imports came before any worker's."""
    path = tmp_path / "s.db"
    seen = _run(SUPERVISOR, str(path))
    assert seen == {"factory": "quipu.surfaces.http.boot:app_from_environment", "loaded": []}
    with sqlite3.connect(path) as raw:  # migrated before the workers start
        assert raw.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] > 0


def test_api_003_issue23_mcp_is_imported_by_the_first_mcp_request(tmp_path: Path) -> None:
    """The server answers without the MCP SDK imported; the first ``/mcp`` request builds the
    endpoint and is answered as before (an ``initialize`` result)."""
    seen = _run(FIRST_MCP_CALL, str(tmp_path / "m.db"))
    assert seen["before"] is False and seen["after_start"] is False and seen["healthy"] == 200
    assert seen["status"] == 200 and seen["after"] is True
    body = seen["body"]
    assert isinstance(body, dict) and body["result"]["serverInfo"]["name"]


def test_ops_001_issue23_a_worker_that_cannot_start_stops_the_server(tmp_path: Path) -> None:
    """A setting only a worker's server checks (a reranker folder that does not exist): the
    workers exit as a startup failure and `quipu serve` stops with status 2, naming the
    error, instead of the supervisor starting them again and again."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "quipu", "serve", "--db", str(tmp_path / "w.db")),
            *("--workers", "2", "--port", str(free_port())),
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=WAIT_S,
        env={
            **os.environ,
            "QUIPU_LOG_LEVEL": "warning",
            "QUIPU_WORKER_EMBEDDED": "false",
            "QUIPU_RERANKER": str(tmp_path / "no-such-reranker"),
        },
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    assert "worker cannot start" in out and "could not start" in out
