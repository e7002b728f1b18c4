"""The whole-store move (OPS-2, issue 27): export every tenant of a SQLite store, import it into
PostgreSQL, and compare both stores row by row: tenants, credentials with their hashes, every
memory version with its vector, sessions with turns, writers and watermarks, and the audit log.
Then the documented commands themselves, as real `quipu` processes (docs/scale-out.md).

Needs the throwaway PostgreSQL server for the move (``scripts/with-testdb.sh``); the round
trip into a second SQLite file, the per-tenant export and the refusals run without it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quipu import portability
from quipu.auth.access import Access
from quipu.composition import build_runtime, load_settings
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import InvalidInput
from quipu.memories import MemoryService
from quipu.storage.base import Store
from quipu.storage.sqlite.store import SQLiteStore
from tests.conftest import PG_URL, schema_url

IMPORTER = Principal("local", "local", Role.ADMIN, surface="cli")


def _fill(tmp_path: Path, embedder: LocalEmbedder) -> SQLiteStore:
    """Two tenants with keys (one revoked, a run token), memories with history, sessions
    with a promotion, and the audit all of it wrote."""
    settings = load_settings({"database": str(tmp_path / "source.db")}, environ={})
    store = SQLiteStore(settings.database)
    service = MemoryService(store, embedder, Limits())
    runtime = build_runtime(settings, service)
    access = Access(store)
    for tenant in ("acme", "beta"):
        access.create_tenant(tenant)
        admin, _ = access.create_key(tenant, "admin", name="ops")
        service_key, _ = access.create_key(tenant, "service", name="backend")
        doomed, _ = access.create_key(tenant, "agent", agent_id="old")
        access.revoke_key(tenant, doomed.key_id)
        backend = Principal(tenant, service_key.key_id, Role.SERVICE)
        access.mint_run_token(backend, "scout", "dana", timedelta(hours=1))
        who = Principal(tenant, admin.key_id, Role.ADMIN, agent_id="scout", user_id="dana")
        first = service.remember(who, f"{tenant}: deploys go out on Tuesdays", tags=["ops"])
        service.remember(who, f"{tenant}: Dana prefers aisle seats", scope="user")
        old = service.remember(who, f"{tenant}: the VPN host is vpn-1").memory
        new = service.remember(who, f"{tenant}: the VPN host is vpn-2").memory
        service.supersede(who, old.id, new.id, reason="migrated", expected_version=1)
        service.revise(
            who, first.memory.id, f"{tenant}: deploys go out on Wednesdays", expected_version=1
        )
        gone = service.remember(who, f"{tenant}: the old locker code is in drawer 4").memory
        service.forget(who, gone.id, reason="asked")
        # a registered project with a memory in it, an active and a released legal hold
        runtime.governance.project_create(who, "apollo", name="Apollo")
        service.remember(who, f"{tenant}: Apollo ships in May", project="apollo")
        runtime.governance.hold(who, "subject", "dana", reason="litigation 17")
        lifted = runtime.governance.hold(who, "memory", first.memory.id, reason="audit")
        runtime.governance.release_hold(who, lifted.hold_id, reason="audit closed")
        for role, content in (("user", "I moved to Porto last month"), ("assistant", "Noted!")):
            runtime.sessions.append(who, "chat-1", role, content, metadata={"n": 1})
        runtime.sessions.promote(who, "chat-1")
        runtime.sessions.append(who, "chat-2", "user", "Call me Dee", metadata={})
    runtime.worker.drain()
    runtime.close()  # closes the store too: open it again, as a later process would
    return SQLiteStore(settings.database)


def _export(store: Store, tenant: str | None = None) -> list[str]:
    out = io.StringIO()
    portability.write_export(out, store, tenant)
    return out.getvalue().splitlines(keepends=True)


def _rows(store: Store) -> dict[str, list[Any]]:
    """Every row a move must carry, in a comparable form, by table."""
    tenants = store.list_tenants()
    credentials = sorted(
        (
            store.find_credential(c.key_id)
            for t in tenants
            for c in store.list_credentials(t.tenant_id)
        ),
        key=lambda found: found[0].key_id if found else "",
    )
    versions = [
        (
            m.tenant_id,
            m.owner,
            m.to_dict(),
            None if v is None else np.asarray(v, np.float32).tobytes(),
        )
        for m, v in store.export_versions(None)
    ]
    audit = [e.to_dict() | {"seq": None} for e in store.export_audit(None)]
    return {
        "tenants": tenants,
        "credentials": credentials,
        "projects": [p for t in tenants for p in store.list_projects(t.tenant_id)],
        "holds": [h for t in tenants for h in store.list_holds(t.tenant_id, True)],
        "versions": versions,
        "sessions": list(store.export_sessions(None)),
        "audit": [e for e in audit if e["action"] != "memory.import"],
        "imports": [e for e in audit if e["action"] == "memory.import"],
    }


def _assert_same(source: dict[str, list[Any]], target: dict[str, list[Any]]) -> None:
    for table in ("tenants", "credentials", "projects", "holds", "versions", "sessions", "audit"):
        assert len(target[table]) == len(source[table]), table
        for left, right in zip(source[table], target[table], strict=True):
            assert left == right, table


@pytest.fixture
def source(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[SQLiteStore]:
    store = _fill(tmp_path, local_embedder)
    yield store
    store.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    if PG_URL is None:
        pytest.skip("needs the test PostgreSQL server (scripts/with-testdb.sh)")
    from tests.support.pg import drop_schema, new_schema

    schema = new_schema(PG_URL, f"t_move_{uuid.uuid4().hex[:10]}")
    yield schema_url(PG_URL, schema)
    drop_schema(PG_URL, schema)


@pytest.mark.postgres
def test_ops_002_sqlite_to_postgres_move_keeps_every_row(
    source: SQLiteStore, postgres_url: str, local_embedder: LocalEmbedder
) -> None:
    from quipu.storage.postgres.store import PostgresStore

    before = _rows(source)
    lines = _export(source)
    target = PostgresStore(postgres_url)
    service = MemoryService(target, local_embedder, Limits())
    try:
        counts = portability.import_records(service, IMPORTER, lines)
        after = _rows(target)
        _assert_same(before, after)
        # every version kept its vector (the target was pinned to the source's model)
        assert all(v is not None for *_, v in after["versions"])
        # one memory.import audit event per tenant that had versions, and nothing else new
        assert sorted(e["tenant_id"] for e in after["imports"]) == ["acme", "beta"]
        assert counts.added == {
            "tenant": 2,
            "credential": len(before["credentials"]),
            "project": 2,
            "hold": 4,
            "version": len(before["versions"]),
            "session": len(before["sessions"]),
            "audit": len(before["audit"]),
        }
        # the moved store serves: a recall on PostgreSQL finds the moved memory
        who = Principal("acme", "k", Role.AGENT, agent_id="scout", user_id="dana")
        hits = service.recall(who, "when do deploys go out?")
        assert hits.results[0].memory.text == "acme: deploys go out on Wednesdays"
        # importing again adds nothing
        again = portability.import_records(service, IMPORTER, lines)
        assert set(again.added.values()) == {0}
        _assert_same(before, _rows(target))
    finally:
        target.close()


def test_ops_002_whole_store_round_trip_into_sqlite(
    source: SQLiteStore, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    before = _rows(source)
    assert len(before["tenants"]) == 2 and len(before["credentials"]) == 8
    assert len(before["sessions"]) == 4 and any(s.watermark for s in before["sessions"])
    assert len(before["projects"]) == 2 and len(before["holds"]) == 4
    assert sum(h.released_at is not None for h in before["holds"]) == 2
    target = SQLiteStore(tmp_path / "copy.db")
    service = MemoryService(target, local_embedder, Limits())
    portability.import_records(service, IMPORTER, _export(source))
    _assert_same(before, _rows(target))
    target.close()


def test_ops_002_tenant_export_holds_only_that_tenant(
    source: SQLiteStore, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    lines = _export(source, "beta")
    assert '"acme' not in "".join(lines)
    target = SQLiteStore(tmp_path / "beta.db")
    service = MemoryService(target, local_embedder, Limits())
    counts = portability.import_records(service, IMPORTER, lines)
    assert [t.tenant_id for t in target.list_tenants()] == ["beta"]
    assert counts.added["credential"] == 4 and counts.added["session"] == 2
    # and --tenant on import takes one tenant out of a whole-store export
    other = SQLiteStore(tmp_path / "acme.db")
    portability.import_records(
        MemoryService(other, local_embedder, Limits()), IMPORTER, _export(source), tenant_id="acme"
    )
    assert [t.tenant_id for t in other.list_tenants()] == ["acme"]
    target.close()
    other.close()


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ('{"type": "tenant", "tenant_id": "x"}', "line 2"),
        (
            '{"type": "credential", "tenant_id": "x", "key_id": "k", "kind": "key", "role": "admin", "created_at": "2024-01-01T00:00:00+00:00", "secret_hash": "00"}',
            "line 2",
        ),
        (
            '{"type": "session", "tenant_id": "x", "owner": "o", "session_id": "s", "turns": [{"seq": "one"}]}',
            "line 2",
        ),
        ('{"type": "audit", "tenant_id": "x", "at": "yesterday"}', "line 2"),
        ('{"type": "project", "tenant_id": "x", "project_id": "p"}', "line 2"),
        (
            '{"type": "hold", "tenant_id": "x", "hold_id": "h", "kind": "subject", "target": "u", "reason": "r", "created_by": "k", "created_at": "2024-01-01T00:00:00+00:00", "released_by": "k"}',
            "line 2",
        ),
        (
            '{"type": "hold", "tenant_id": "x", "hold_id": "h", "kind": "planet", "target": "u", "reason": "r", "created_by": "k", "created_at": "2024-01-01T00:00:00+00:00"}',
            "line 2",
        ),
        (
            '{"type": "tenant", "tenant_id": "x\\u0000", "name": "x", "created_at": "2024-01-01T00:00:00+00:00"}',
            "",
        ),
        ('{"type": "nothing"}', "line 2"),
        ("[" * 100_000, "line 2"),
    ],
)
def test_safe_005_a_malformed_export_is_refused_with_a_code(
    tmp_path: Path, local_embedder: LocalEmbedder, line: str, where: str
) -> None:
    head = '{"type": "header", "format": "quipu-export", "version": 2, "tenant": null}\n'
    target = SQLiteStore(tmp_path / "t.db")
    service = MemoryService(target, local_embedder, Limits())
    with pytest.raises(InvalidInput) as refused:
        portability.import_records(service, IMPORTER, [head, line + "\n"])
    assert refused.value.code in ("invalid_export", "invalid_text", "invalid_tenant_id")
    assert where in refused.value.message
    assert target.list_tenants() == []
    target.close()


# -- the documented commands, as real processes ------------------------------------------------
def _quipu(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "QUIPU_LOG_LEVEL": "warning"}
    return subprocess.run(
        [sys.executable, "-m", "quipu", *args],
        check=False,
        input=stdin,
        capture_output=True,
        env=env,
        timeout=300,
    )


@pytest.mark.postgres
def test_ops_002_documented_move_commands(
    source: SQLiteStore, postgres_url: str, tmp_path: Path
) -> None:
    """docs/scale-out.md: `quipu export --database X > f` then `quipu import --database Y < f`."""
    assert postgres_url.startswith("postgresql://")  # the schema rides in its options
    url = postgres_url
    dump = _quipu("export", "--database", str(tmp_path / "source.db"))
    assert dump.returncode == 0, dump.stderr.decode()
    assert b"exported" in dump.stderr and dump.stdout.startswith(b'{"type": "header"')
    loaded = _quipu("import", "--database", url, "--json", stdin=dump.stdout)
    assert loaded.returncode == 0, loaded.stderr.decode()
    assert b'"imported"' in loaded.stdout
    from quipu.storage.postgres.store import PostgresStore

    target = PostgresStore(postgres_url)
    try:
        _assert_same(_rows(source), _rows(target))
    finally:
        target.close()


def test_ops_002_cli_refusals_carry_codes(tmp_path: Path) -> None:
    missing = _quipu("import", str(tmp_path / "nope.jsonl"), "--database", str(tmp_path / "x.db"))
    assert missing.returncode == 1 and missing.stderr.startswith(b"file_not_found: ")
    folder = _quipu("export", "--out", str(tmp_path), "--database", str(tmp_path / "x.db"))
    assert folder.returncode == 1 and b"file_unwritable: " in folder.stderr
    garbage = _quipu("import", "--database", str(tmp_path / "x.db"), stdin=b"hello\n")
    assert garbage.returncode == 1 and b"invalid_export: " in garbage.stderr
    assert b"Traceback" not in missing.stderr + folder.stderr + garbage.stderr
