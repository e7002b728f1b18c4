"""A real `quipu serve --auth` subprocess for the console's browser tests, on a SQLite file or
a fresh PostgreSQL schema, with two tenants and their keys made through :class:`Access` (what
`quipu tenants create` / `quipu keys create` call) before the server starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from quipu.auth.access import Access
from quipu.evals.http_load import free_port
from quipu.storage.base import Store

#: Where the browser tests keep the console's screenshots: a temporary folder, so a test run
#: leaves the checkout as it was; `make docs-screenshots` points QUIPU_SCREENSHOTS at
#: docs/console/ (docs/console.md shows them) to refresh them on purpose.
SCREENSHOTS = Path(
    os.environ.get("QUIPU_SCREENSHOTS") or Path(tempfile.gettempdir()) / "quipu-console-shots"
)


def open_store(db: str) -> Store:
    if db.startswith(("postgresql://", "postgres://")) or " " in db:
        from quipu.storage.postgres.store import PostgresStore

        return PostgresStore(db, max_connections=2)
    from quipu.storage.sqlite.store import SQLiteStore

    return SQLiteStore(db)


@dataclass
class ConsoleServer:
    """The running server, its keys (secrets) and an API client per key."""

    url: str
    db: str
    process: subprocess.Popen[bytes]
    log: Path
    keys: dict[str, str] = field(default_factory=dict)

    def api(self, who: str, tenant: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[who]}"}
        if tenant is not None:
            headers["X-Quipu-Tenant"] = tenant
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def remember(self, who: str, text: str, **fields: Any) -> dict[str, Any]:
        with self.api(who) as client:
            made = client.post("/v1/memories", json={"text": text, **fields})
        assert made.status_code in (200, 201), made.text
        found: dict[str, Any] = made.json()["memory"]
        return found

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def make_keys(db: str) -> dict[str, str]:
    """Tenants ``acme`` and ``other``; in acme an admin, a superadmin, an agent key for
    ``support-bot`` serving end user ``u-17``, and in other an agent key."""
    store = open_store(db)
    try:
        access = Access(store)
        access.create_tenant("acme", "Acme")
        access.create_tenant("other", "Other")
        keys = {}
        for name, tenant, role, extra in (
            ("admin", "acme", "admin", {}),
            ("superadmin", "acme", "superadmin", {}),
            ("agent", "acme", "agent", {"agent_id": "support-bot", "user_id": "u-17"}),
            ("other_agent", "other", "agent", {"agent_id": "other-bot"}),
        ):
            _, secret = access.create_key(tenant, role, name=name, **extra)
            keys[name] = secret
        return keys
    finally:
        store.close()


def start(db: str, workdir: Path) -> ConsoleServer:
    return serve(db, workdir, make_keys(db))


def serve(db: str, workdir: Path, keys: dict[str, str], *, wait: float = 300) -> ConsoleServer:
    """`quipu serve --auth` on ``db`` (already holding ``keys``), up and healthy within
    ``wait`` seconds (its worker processes load the model: minutes on a loaded machine)."""
    port = free_port()
    env = {
        **os.environ,
        "QUIPU_LOG_LEVEL": "warning",
        # The tests drive jobs by hand (a failed job to retry); no worker takes them first.
        "QUIPU_WORKER_EMBEDDED": "false",
    }
    log = workdir / f"serve-{uuid.uuid4().hex[:6]}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "quipu", "serve", "--auth", "--db", db, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    server = ConsoleServer(url, db, process, log, keys)
    deadline = time.monotonic() + wait
    while True:
        if process.poll() is not None:
            raise RuntimeError(log.read_text())
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError("quipu serve did not come up:\n" + log.read_text())
        time.sleep(0.2)
