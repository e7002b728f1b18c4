"""An erase reaches what later planes derived from a memory (issue 22 gap 1, LIFE-4): the
knowledge articles graduated from it lose every version's content and keep a tombstone, and its
usage rows (events, recall counter, graduation stamp) go. Both paths: ``erase`` of one memory
and the subject erasure job. Proof by byte scan as in test_erase_bytes: the SQLite file after
the erase and a VACUUM; every row of every PostgreSQL table, then the relation files after the
prescribed vacuum."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.knowledge import ArticleStatus
from quipu.core.records import Principal, Role
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.graph.service import GraphService
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.usage import Graduation, UsageRecorder
from tests.contract.test_erase_bytes import _column_hits, _relation_files

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
ADMIN_OF_ALICE = Principal("t1", "key-admin", Role.ADMIN, agent_id="alice", user_id="u-alice")
ROOT = "zqxvmrtk"
AGENT_TEXT = "Zqxvmrtkderived deploys of the billing service run on Tuesdays"
USER_TEXT = "Zqxvmrtksubject prefers the night train to Vienna"
UPDATE_REASON = "the body now says zqxvmrtkreason"


def _graduate_both(service: MemoryService, alice: Principal) -> tuple[Any, list[str], list[str]]:
    """Two memories of alice (agent scope; user scope), each recalled (usage rows) and
    graduated; the first article then updated with a reason quoting it."""
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        service,
        extractor=DeterministicExtractor(),
    )
    service.graph = GraphService(service)  # GRAPH-1: the erased texts name entities
    recorder = UsageRecorder(service.store, service.embedder)
    service.usage = recorder
    agent_m = service.remember(alice, AGENT_TEXT).memory
    user_m = service.remember(alice, USER_TEXT, scope="user").memory
    assert rt.index is not None  # CONSOL-1: both scopes' compiled indexes quote them
    for scope in ("agent", "user"):
        assert ROOT in "\n".join(rt.index.rebuild(ADMIN_OF_ALICE, scope=scope).lines()).lower()
    assert service.graph.facts(alice, "Zqxvmrtkderived").entities
    service.recall(alice, "when do billing deploys run?")
    service.recall(alice, "how does the subject like to travel to Vienna?", scope="user")
    recorder.flush()
    recorder.close()
    service.usage = None
    assert service.store.usage_events("t1", agent_m.id)
    grad = Graduation(KnowledgeService(service))
    articles = [grad.graduate(alice, m.id).article["id"] for m in (agent_m, user_m)]
    first = grad.knowledge.get(alice, articles[0])
    grad.knowledge.update(
        alice,
        first.id,
        expected_version=first.version,
        body=AGENT_TEXT + " and Thursdays",
        reason=UPDATE_REASON,
    )
    return rt, [agent_m.id, user_m.id], articles


def _erase_both(rt: Any, agent_memory: str) -> dict[str, Any]:
    erased = rt.governance.erase(ADMIN, agent_memory, reason="request 42")
    job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="request 42")
    rt.worker.drain()
    done = rt.governance.erasure_job(ADMIN, job.job_id)
    assert done.status.value == "succeeded"
    return {"erase": erased.report.counts, "subject": done.result["counts"]}


def _check_tombstones(service: MemoryService, memories: list[str], articles: list[str]) -> None:
    store = service.store
    for article_id, memory_id in zip(articles, memories, strict=True):
        history = store.knowledge_history("t1", article_id)
        assert history[-1].status is ArticleStatus.ERASED
        assert history[-1].memory_id == memory_id  # ids stay: the tombstone names its source
        assert all(v.title == "" and v.body == "" for v in history)
        assert store.usage_events("t1", memory_id) == []
        assert store.memory_usage("t1", memory_id) is None
    assert store.knowledge_by_memory("t1", memories) == []


def test_life_004_derived_sqlite_bytes_hold_no_erased_string(
    service: MemoryService, alice: Principal, backend: str, tmp_path: Path
) -> None:
    """Issue 22 gap 1: graduated articles and usage rows of erased memories, SQLite file."""
    if backend != "sqlite":
        pytest.skip("the SQLite file scan; PostgreSQL has its own below")
    rt, memories, articles = _graduate_both(service, alice)
    files = [tmp_path / f"quipu.db{suffix}" for suffix in ("", "-wal", "-shm")]
    store: Any = service.store
    counts = _erase_both(rt, memories[0])
    assert counts["erase"]["knowledge_versions"] == 2  # created, then updated
    assert counts["erase"]["usage_events"] >= 1 and counts["erase"]["memory_usage"] == 1
    assert counts["subject"]["knowledge_versions"] == 1
    _check_tombstones(service, memories, articles)
    store.reclaim()
    found = {p.name: p.read_bytes().lower().count(ROOT.encode()) for p in files if p.exists()}
    assert found and set(found.values()) == {0}, found
    rt.close()


def test_life_004_derived_postgres_rows_and_files_hold_no_erased_string(
    service: MemoryService, alice: Principal, backend: str
) -> None:
    """Issue 22 gap 1: graduated articles and usage rows of erased memories, every PG row."""
    if backend != "postgres":
        pytest.skip("the PostgreSQL scan; SQLite has its own above")
    rt, memories, articles = _graduate_both(service, alice)
    store: Any = service.store
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        seen = _column_hits(conn)  # the scan sees the articles, the graph and the index
        assert {"knowledge_versions", "graph_entities", "memory_index_versions"} <= set(seen)
    counts = _erase_both(rt, memories[0])
    assert counts["erase"]["knowledge_versions"] == 2
    assert counts["subject"]["knowledge_versions"] == 1
    _check_tombstones(service, memories, articles)
    report = store.reclaim()
    assert {"knowledge_versions", "usage_events"} <= set(report["vacuumed"])
    assert {"graph_entities", "graph_facts", "memory_index_versions"} <= set(report["vacuumed"])
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        assert _column_hits(conn) == {}
        files = _relation_files(conn)
    on_disk = {str(p): n for p in files if (n := p.read_bytes().lower().count(ROOT.encode()))}
    assert on_disk == {}
    rt.close()
