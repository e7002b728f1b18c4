"""Proof by byte scan (issue 22, LIFE-4): distinctive strings written through every path —
remember, revise, its reason, quote, metadata keys and values, tags, aliases, session turns and
their metadata, promotion — are found in the store's bytes before an erase and nowhere after.

SQLite: the database, WAL and shared-memory files, after the erase's own WAL checkpoint.
PostgreSQL: every column of every table of the store's schema, read as text by SQL; then, after
the vacuum docs/data-lifecycle.md prescribes (``quipu reclaim``), the relation files on disk.
A later export carries the tombstones, never the content."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal, Role, Status
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.memories import MemoryService

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
ROOT = "zqxvmrtk"
#: Every path a string reaches the store through; each needle starts with ROOT.
NEEDLES = {
    "text": "Zqxvmrtktext is the codename of the basement project",
    "revised": "Zqxvmrtkrevised is the new codename",
    "reason": "renamed after zqxvmrtkreason",
    "quote": "she said zqxvmrtkquote twice",
    "meta_value": "zqxvmrtkmetavalue",
    "meta_key": "zqxvmrtkmetakey",
    "tag": "zqxvmrtktag",
    "alias": "zqxvmrtkalias",
    "agent_scope": "Zqxvmrtkagent deploys happen on Fridays",
    "turn": "My neighbour Zqxvmrtkturn waters the plants",
    "turn_meta": "zqxvmrtkturnmeta",
    "promoted": "I live in Zqxvmrtkville.",
}


def _write_everything(service: MemoryService, alice: Principal) -> tuple[Any, list[str]]:
    settings = load_settings({"database": "unused.db"}, environ={})
    rt = build_runtime(settings, service, extractor=DeterministicExtractor())
    m = service.remember(
        alice,
        NEEDLES["text"],
        scope="user",
        quote=NEEDLES["quote"],
        metadata={NEEDLES["meta_key"]: NEEDLES["meta_value"]},
        tags=[NEEDLES["tag"]],
        aliases=[NEEDLES["alias"]],
        session_id="s-bytes",
    ).memory
    service.revise(alice, m.id, NEEDLES["revised"], reason=NEEDLES["reason"])
    agent_only = service.remember(alice, NEEDLES["agent_scope"]).memory
    rt.sessions.append(alice, "s-bytes", "user", NEEDLES["promoted"])
    rt.sessions.append(
        alice, "s-bytes", "user", NEEDLES["turn"], metadata={"note": NEEDLES["turn_meta"]}
    )
    rt.sessions.promote(alice, "s-bytes")
    rt.worker.drain()
    promoted = service.list(alice, scope="agent_user", sources=["promoted"]).items
    assert any("zqxvmrtkville" in p.text.lower() for p in promoted), promoted
    return rt, [m.id, agent_only.id]


def _erase_everything(rt: Any, agent_memory: str) -> None:
    rt.governance.erase(ADMIN, agent_memory, reason="request 42")
    job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="request 42")
    rt.worker.drain()
    assert rt.governance.erasure_job(ADMIN, job.job_id).status.value == "succeeded"


def _hits(blob: bytes) -> int:
    return blob.lower().count(ROOT.encode())


def test_life_004_sqlite_bytes_hold_no_erased_string(
    service: MemoryService, alice: Principal, backend: str, tmp_path: Path
) -> None:
    if backend != "sqlite":
        pytest.skip("the SQLite file scan; PostgreSQL has its own below")
    rt, (user_memory, agent_memory) = _write_everything(service, alice)
    files = [tmp_path / f"quipu.db{suffix}" for suffix in ("", "-wal", "-shm")]
    indexes = tmp_path / "quipu.db-index"  # the scope index files (issue 23) hold BM25 keys
    assert sum(_hits(p.read_bytes()) for p in indexes.iterdir()) > 0
    assert sum(_hits(p.read_bytes()) for p in files if p.exists()) > 0  # the scan sees them
    _erase_everything(rt, agent_memory)
    store: Any = service.store
    assert store.checkpoint()
    files += sorted(indexes.iterdir())
    found = {p.name: _hits(p.read_bytes()) for p in files if p.exists()}
    assert found and set(found.values()) == {0}, found
    _export_holds_tombstones_only(service, alice, [user_memory, agent_memory])
    rt.close()


def test_life_004_postgres_columns_and_files_hold_no_erased_string(
    service: MemoryService, alice: Principal, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("the PostgreSQL scan; SQLite has its own above")
    rt, (user_memory, agent_memory) = _write_everything(service, alice)
    store: Any = service.store
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        assert sum(_column_hits(conn).values()) > 0  # the SQL scan sees them
        conn.execute("CHECKPOINT")
        files = _relation_files(conn)
        assert sum(_hits(p.read_bytes()) for p in files) > 0  # the file scan sees them
    _erase_everything(rt, agent_memory)
    report = store.reclaim()
    assert "memory_versions" in report["vacuumed"]
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        assert _column_hits(conn) == {}
        files = _relation_files(conn)
    on_disk = {str(p): n for p in files if (n := _hits(p.read_bytes()))}
    assert on_disk == {}
    _export_holds_tombstones_only(service, alice, [user_memory, agent_memory])
    rt.close()


def _export_holds_tombstones_only(
    service: MemoryService, alice: Principal, erased: list[str]
) -> None:
    rows = [m.to_dict() for m, _ in service.export(alice)]
    assert ROOT not in json.dumps(rows).lower()
    current = {r["id"]: r for r in rows if r["is_current"]}
    for ident in erased:
        assert current[ident]["status"] == Status.ERASED.value


def _column_hits(conn: psycopg.Connection[Any], needle: str = ROOT) -> dict[str, int]:
    """Rows of each table of the schema whose whole row, as text, holds the needle root: every
    text, json, bytea, array and tsvector column at once."""
    tables = [
        str(r[0])
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    ]
    assert "memory_versions" in tables and "session_turns" in tables
    out: dict[str, int] = {}
    needle = needle.lower()
    for table in tables:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} x WHERE lower(x::text) LIKE %s").format(
                sql.Identifier(table)
            ),
            (f"%{needle}%",),
        ).fetchone()
        if row and row[0]:
            out[table] = int(row[0])
    return out


def _relation_files(conn: psycopg.Connection[Any]) -> list[Path]:
    """The files of every table, index and TOAST relation of the schema, all segments."""
    data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    if not data.is_dir():
        pytest.skip(f"the server's data directory {data} is not readable here")
    rows = conn.execute(
        "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
        " AND c.relkind IN ('r', 'i', 't', 'm')"
        " UNION SELECT pg_relation_filepath(t.oid) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid"
        " WHERE n.nspname = current_schema()"
        " UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace JOIN pg_index i ON i.indrelid = c.reltoastrelid"
        " WHERE n.nspname = current_schema()"
    ).fetchall()
    files: list[Path] = []
    for (relative,) in rows:
        if relative is None:
            continue
        base = data / str(relative)
        files += [p for p in base.parent.glob(base.name + "*") if p.is_file()]
    assert files
    return files


_ = replace  # dataclasses.replace stays importable for readers extending the scenario
