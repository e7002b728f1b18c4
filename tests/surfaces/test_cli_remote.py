"""The CLI's memory verbs against a Quipu server (API-4, issue 20 defect 15).

``quipu recall ... --db http://host:port`` used to create a SQLite file under a folder named
``http:``. Now every memory verb speaks to the server through ``quipu.Client`` with the key
in ``QUIPU_API_KEY``; commands the server cannot serve refuse clearly; any other URL-like
value is refused, never a folder. The server is the real app `quipu serve` runs
(``build_server``), on a free loopback port, over a real SQLite file and the real model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quipu.composition import build_access, load_settings
from quipu.embeddings.local import LocalEmbedder
from quipu.runtime import Runtime
from quipu.surfaces.cli.app import app
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer

runner = CliRunner()
NO_KEY: dict[str, str | None] = {"QUIPU_API_KEY": None, "QUIPU_DATABASE": None}


@dataclass
class Server:
    url: str
    runtime: Runtime
    folder: Path


def _serve(folder: Path, embedder: LocalEmbedder, *, auth: bool) -> Iterator[Server]:
    settings = load_settings(
        {"database": str(folder / "server.db"), "auth": auth, "worker_embedded": False},
        environ={},
    )
    api, runtime = build_server(settings, embedder=embedder)
    live = LiveServer(api)
    try:
        yield Server(live.url, runtime, folder)
    finally:
        live.close()
        runtime.close()


@pytest.fixture
def server(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Server]:
    yield from _serve(tmp_path_factory.mktemp("server"), local_embedder, auth=False)


@pytest.fixture
def auth_server(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Server]:
    yield from _serve(tmp_path_factory.mktemp("auth-server"), local_embedder, auth=True)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory: whatever a command creates locally shows up here."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(*args: str, key: str | None = None, **env: str | None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={**NO_KEY, "QUIPU_API_KEY": key, **env})
    # stderr as one line: rich wraps long messages at the console width
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def ok(*args: str, key: str | None = None, **env: str | None) -> dict[str, object]:
    code, out, err = cli(*args, "--json", key=key, **env)
    assert code == 0, err
    data: dict[str, object] = json.loads(out)
    return data


def test_api_004_every_memory_verb_runs_against_a_server(server: Server, workdir: Path) -> None:
    """Issue 20 defect 15: each verb is a request to the server, nothing is written locally."""
    db = ("--db", server.url)
    first = ok("remember", "Dana prefers window seats", *db, "--kind", "preference", "--tag", "t")
    memory = first["memory"]
    assert isinstance(memory, dict) and first["created"] is True
    mid = memory["id"]
    assert memory["provenance"]["surface"] == "http"  # written by the server's HTTP surface
    recalled = ok("recall", "where does Dana like to sit?", *db)
    assert [h["memory"]["id"] for h in recalled["results"]] == [mid]  # type: ignore[attr-defined]
    assert (
        ok("revise", mid, "Dana prefers aisle seats", *db, "--expected-version", "1")["version"]
        == 2
    )
    assert ok("get", mid, *db)["text"] == "Dana prefers aisle seats"
    listed = ok("list", *db)
    assert [m["id"] for m in listed["items"]] == [mid]  # type: ignore[attr-defined]
    # (leaving quarantine is a review by another key since issue 22: archive instead)
    archived = ok("status", mid, "archived", *db, "--reason", "check", "--expected-version", "2")
    assert archived["status"] == "archived"
    assert (
        ok("status", mid, "active", *db, "--expected-version", "3", "--reason", "back")["status"]
        == "active"
    )
    newer = ok("remember", "Dana now prefers the exit row", *db)["memory"]
    assert isinstance(newer, dict)
    superseded = ok(
        "supersede", mid, newer["id"], *db, "--reason", "moved", "--expected-version", "4"
    )
    assert superseded["status"] == "superseded"
    assert ok("forget", newer["id"], *db, "--reason", "test")["status"] == "unavailable"
    versions = ok("history", mid, *db)["versions"]
    assert [v["version"] for v in versions] == [1, 2, 3, 4, 5]  # type: ignore[attr-defined]
    # human-readable output renders too
    code, out, _ = cli("history", mid, *db)
    assert code == 0 and "superseded" in out
    # the server holds the rows; the working directory holds nothing (no folder `http:`)
    assert list(workdir.iterdir()) == []
    assert (server.folder / "server.db").exists()


def test_api_004_a_server_error_keeps_its_code(server: Server, workdir: Path) -> None:
    code, _, err = cli("get", "0123456789abcdef0123456789abcdef", "--db", server.url)
    assert code == 1 and "not_found" in err
    code, _, err = cli("recall", "   ", "--db", server.url)
    assert code == 1 and "invalid_query" in err
    code, _, err = cli(
        "remember", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "--db", server.url
    )
    assert code == 1 and "secret_detected" in err
    assert list(workdir.iterdir()) == []


def test_api_004_the_database_setting_may_name_the_server(server: Server, workdir: Path) -> None:
    """``QUIPU_DATABASE`` (or the config file) works like ``--db``."""
    mid = ok("remember", "the build runs on Fridays", QUIPU_DATABASE=server.url)["memory"]
    assert isinstance(mid, dict)
    listed = ok("list", QUIPU_DATABASE=server.url)
    assert [m["id"] for m in listed["items"]] == [mid["id"]]  # type: ignore[attr-defined]
    assert list(workdir.iterdir()) == []


def test_api_004_unreachable_server_is_a_clear_error(workdir: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = cli("recall", "anything", "--db", f"http://127.0.0.1:{port}")
    assert code == 1 and "server_unreachable" in err
    assert list(workdir.iterdir()) == []


def test_scope_001_cli_against_auth_server_uses_the_key_from_the_environment(
    auth_server: Server, workdir: Path
) -> None:
    """With --auth the key comes from QUIPU_API_KEY; the server decides who the caller is."""
    access = build_access(load_settings({}, environ={}), auth_server.runtime.service.store)
    access.create_tenant("acme")
    _, alice = access.create_key("acme", "agent", agent_id="alice")
    _, bob = access.create_key("acme", "agent", agent_id="bob")
    db = ("--db", auth_server.url)

    code, _, err = cli("remember", "alice's locker is 12", *db)
    assert code == 1 and "unauthorized" in err and "QUIPU_API_KEY" in err
    code, _, err = cli("list", *db, key="qk_not_a_real_key_0123456789")
    assert code == 1 and "unauthorized" in err

    memory = ok("remember", "alice's locker is 12", *db, key=alice)["memory"]
    assert isinstance(memory, dict) and memory["provenance"]["agent_id"] == "alice"
    assert [h["memory"]["id"] for h in ok("recall", "locker", *db, key=alice)["results"]] == [  # type: ignore[attr-defined]
        memory["id"]
    ]
    assert ok("list", *db, key=bob)["items"] == []  # bob's agent scope is his own
    code, _, err = cli("get", memory["id"], *db, key=bob)
    assert code == 1 and "not_found" in err
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["export"],
        ["import", "backup.jsonl"],
        ["reindex"],
        ["migrate"],
        ["serve"],
        ["mcp"],
        ["worker", "--once"],
        ["jobs", "list"],
        ["tenants", "list"],
        ["keys", "list", "--tenant", "acme"],
        ["tokens", "mint", "--agent-id", "a"],
    ],
)
def test_api_004_commands_a_server_cannot_serve_refuse_clearly(
    command: list[str], workdir: Path
) -> None:
    """Issue 20 defect 15: no store is opened (or folder made) on a server URL."""
    (workdir / "backup.jsonl").write_text("")
    code, _, err = cli(*command, "--db", "http://127.0.0.1:8750", key="qk_service_key_0123456789")
    assert code == 2, err
    assert "needs a store" in err and "memory verbs" in err
    assert sorted(p.name for p in workdir.iterdir()) == ["backup.jsonl"]


@pytest.mark.parametrize(
    ("db", "says"),
    [
        ("http:/x", "not a server URL"),
        ("https:host", "not a server URL"),
        ("ftp://files.example/quipu.db", "scheme ftp:"),
        ("localhost:8750", "scheme localhost:"),
        ("file:quipu.db", "scheme file:"),
        ("http://", "no host"),
        ("http://127.0.0.1:99999", "invalid port"),
        ("http://127.0.0.1:8750/?a=1", "no query"),
        ("http://127.0.0.1:8750/\x00", "NUL"),
        ("http://127.0.0.1:\udcff", "lone surrogate"),
        ("http://127.0.0.1 :8750", "space or control"),
        ("http://alice:hunter2@127.0.0.1:8750", "carries credentials"),
    ],
)
@pytest.mark.parametrize("verb", [["recall", "q"], ["remember", "a fact"], ["export"]])
def test_api_004_db_values_that_name_nothing_are_refused(
    db: str, says: str, verb: list[str], workdir: Path
) -> None:
    """Issue 20 defect 15: hostile or mistyped --db values never become folders."""
    code, out, err = cli(*verb, "--db", db)
    assert code == 2 and "database" in err and says in err, err
    assert "hunter2" not in out + err
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    "key", ["has a space", "tab\there", "caf\u00e9-key", "lone-\udcff-surrogate", "x" * 5000]
)
def test_api_004_a_malformed_key_is_refused_without_echo(
    server: Server, workdir: Path, key: str
) -> None:
    code, out, err = cli("list", "--db", server.url, key=key)
    assert code == 2 and "QUIPU_API_KEY" in err and "not an API key" in err
    assert key not in out + err
    assert list(workdir.iterdir()) == []
