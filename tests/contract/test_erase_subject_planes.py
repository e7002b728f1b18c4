"""Subject erasure covers the key/value and documents planes (issue 22 gap 2, LIFE-4): every
key and document in the user's ``user`` and ``agent_user`` partitions — set, overwritten,
deleted — loses its values, reasons, titles, metadata, chunks and chunk vectors; the final
report counts them per table; what belongs to other partitions and users stays. Proof by byte
scan as in test_erase_bytes (SQLite file after a VACUUM; every PostgreSQL row, then the
relation files after the prescribed vacuum)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal, Role
from quipu.documents import DocumentService
from quipu.errors import NotFound
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.graph.service import GraphService
from quipu.kv import KeyValueService
from quipu.memories import MemoryService
from tests.contract.test_erase_bytes import _column_hits, _relation_files

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
ROOT = "zqxvmrtk"  # what must go (test_erase_bytes scans for it)
KEEP = "Kqzwplkeep"  # what must stay: the agent's own scope and another user's


def _write_planes(
    service: MemoryService, alice: Principal, bob: Principal
) -> tuple[Any, KeyValueService, DocumentService, list[str]]:
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        service,
        extractor=DeterministicExtractor(),
    )
    service.graph = GraphService(service)  # DOC-1: chunks with entity metadata feed the graph
    kv, docs = KeyValueService(service), DocumentService(service)
    kv.set(alice, "train", {"v": "zqxvmrtkvalue1"}, scope="user", reason="zqxvmrtkreason1")
    kv.set(alice, "train", {"v": "zqxvmrtkvalue2"}, scope="user")
    kv.set(alice, "desk", "zqxvmrtkdesk", scope="agent_user")
    kv.delete(alice, "desk", scope="agent_user", reason="moved zqxvmrtkdesk")
    kv.set(alice, "team", KEEP + " agent value")  # the agent's own scope: not the subject's
    kv.set(bob, "train", KEEP + " bob value", scope="user")
    body = "Zqxvmrtkdoc chapter one.\n\n" + "The subject's notes go on. " * 60
    meta = {"k": ROOT + "m", "entity": {"name": "Zqxvmrtk Widget", "type": "product"}}
    docs.add(alice, body, title="Zqxvmrtktitle", scope="user", metadata=meta, reason=ROOT + "r")
    assert service.graph.facts(alice, "Zqxvmrtk Widget", scope="user").facts  # in the graph
    gone = docs.add(alice, "Zqxvmrtkshared plan for the offsite", title="plan", scope="agent_user")
    docs.delete(alice, gone["document"]["id"], scope="agent_user", reason="zqxvmrtkdeleted")
    kept = [docs.add(bob, KEEP + " bob manual", title="manual", scope="user")["document"]["id"]]
    return rt, kv, docs, kept


def _erase_subject(rt: Any) -> dict[str, int]:
    job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="request 42")
    rt.worker.drain()
    done = rt.governance.erasure_job(ADMIN, job.job_id)
    assert done.status.value == "succeeded", done.last_error
    counts: dict[str, int] = done.result["counts"]
    assert counts["kv_keys"] == 2 and counts["kv_entries"] == 4  # train x2, desk set + delete
    assert counts["documents"] == 2 and counts["doc_chunks"] >= 3
    return counts


def _check_reads(
    kv: KeyValueService, docs: DocumentService, alice: Principal, bob: Principal, kept: list[str]
) -> None:
    with pytest.raises(NotFound):
        kv.get(alice, "train", scope="user")
    assert [e.value for e in kv.history(alice, "train", scope="user")] == [None, None]
    assert kv.get(alice, "team").value == KEEP + " agent value"
    assert kv.get(bob, "train", scope="user").value == KEEP + " bob value"
    assert docs.list(alice, scope="user")["items"] == []
    assert docs.get(bob, kept[0], scope="user").title == "manual"
    assert docs.search(bob, "bob manual", scope="user")["results"]


def _hits(blob: bytes, root: str = ROOT) -> int:
    return blob.lower().count(root.lower().encode())


def test_life_004_subject_kv_documents_sqlite_bytes(
    service: MemoryService, alice: Principal, bob: Principal, backend: str, tmp_path: Path
) -> None:
    """Issue 22 gap 2: the subject's keys and documents leave the SQLite file."""
    if backend != "sqlite":
        pytest.skip("the SQLite file scan; PostgreSQL has its own below")
    rt, kv, docs, kept = _write_planes(service, alice, bob)
    files = [tmp_path / f"quipu.db{suffix}" for suffix in ("", "-wal", "-shm")]
    assert sum(_hits(p.read_bytes()) for p in files if p.exists()) > 0  # the scan sees them
    _erase_subject(rt)
    _check_reads(kv, docs, alice, bob, kept)
    store: Any = service.store
    store.reclaim()
    found = {p.name: _hits(p.read_bytes()) for p in files if p.exists()}
    assert found and set(found.values()) == {0}, found
    assert sum(_hits(p.read_bytes(), KEEP) for p in files if p.exists()) > 0
    rt.close()


def test_life_004_subject_kv_documents_postgres_rows_and_files(
    service: MemoryService, alice: Principal, bob: Principal, backend: str
) -> None:
    """Issue 22 gap 2: the subject's keys and documents leave every PostgreSQL row and file."""
    if backend != "postgres":
        pytest.skip("the PostgreSQL scan; SQLite has its own above")
    rt, kv, docs, kept = _write_planes(service, alice, bob)
    store: Any = service.store
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        assert {"kv_entries", "documents", "doc_chunks"} <= set(_column_hits(conn))
    _erase_subject(rt)
    _check_reads(kv, docs, alice, bob, kept)
    store.reclaim()
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        assert _column_hits(conn) == {}
        files = _relation_files(conn)
    assert {str(p): n for p in files if (n := _hits(p.read_bytes()))} == {}
    rt.close()
