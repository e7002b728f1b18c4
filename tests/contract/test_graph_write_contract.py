"""The entity graph's write paths on every backend (issue 26, GRAPH-1): a memory and its graph
mirror commit in one transaction, and memories that reach the store by revise, restore, review,
import or an old store (``quipu graph backfill``) feed the graph too."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role, Scope
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import LimitExceeded, NotFound
from quipu.governance import GovernanceService
from quipu.graph.backfill import backfill
from quipu.graph.service import GraphService
from quipu.memories import MemoryService

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="alice", user_id="u-alice")


@pytest.fixture
def graph(service: MemoryService) -> GraphService:
    found = GraphService(service)
    service.graph = found
    return found


def _objects(graph: GraphService, who: Principal, subject: str, **kw: object) -> list[str]:
    try:
        answer = graph.facts(who, subject, **kw)  # type: ignore[arg-type]
    except NotFound:
        return []
    return sorted(
        f"{f.fact.predicate}:{f.object.name if f.object else f.fact.value}" for f in answer.facts
    )


def _count(service: MemoryService, backend: str, table: str) -> int:
    store = service.store
    if backend == "sqlite":
        return int(store._writer.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[attr-defined]
    with store._conn() as conn:  # type: ignore[attr-defined]
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@contextmanager
def _failing_fact_insert(service: MemoryService, backend: str) -> Iterator[None]:
    """A real failure inside the graph write: the database refuses every new fact row."""
    store = service.store
    if backend == "sqlite":
        conn = store._writer  # type: ignore[attr-defined]
        conn.execute(
            "CREATE TRIGGER fail_fact BEFORE INSERT ON graph_facts"
            " BEGIN SELECT RAISE(ABORT, 'injected graph failure'); END"
        )
        try:
            yield
        finally:
            conn.execute("DROP TRIGGER fail_fact")
        return
    with store._tx() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "CREATE FUNCTION fail_fact() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'injected graph failure'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER fail_fact BEFORE INSERT ON graph_facts"
            " FOR EACH ROW EXECUTE FUNCTION fail_fact()"
        )
    try:
        yield
    finally:
        with store._tx() as conn:  # type: ignore[attr-defined]
            conn.execute("DROP TRIGGER fail_fact ON graph_facts")


def test_graph_001_memory_and_its_graph_rows_commit_together_or_not_at_all(
    service: MemoryService, graph: GraphService, alice: Principal, backend: str
) -> None:
    """Issue 26 remainder 2: the graph mirror is written in the memory's own transaction."""
    if backend == "citus":
        pytest.skip("a trigger on a distributed table is not how Citus injects a failure")
    kept = service.remember(alice, "Anna lives in Berlin.").memory
    assert _objects(graph, alice, "Anna") == ["lives_in:Berlin"]  # the normal path: both
    memories, facts = (
        _count(service, backend, "memory_versions"),
        _count(service, backend, "graph_facts"),
    )
    entities = _count(service, backend, "graph_entities")
    with _failing_fact_insert(service, backend), pytest.raises((sqlite3.Error, psycopg.Error)):
        service.remember(alice, "Bruno works at Siemens.")
    # neither the memory nor any graph row of it is stored
    assert _count(service, backend, "memory_versions") == memories
    assert _count(service, backend, "graph_facts") == facts
    assert _count(service, backend, "graph_entities") == entities
    assert _count(service, backend, "graph_mentions") == 2  # Anna and Berlin only
    listed = service.list(alice, limit=10).items
    assert [m.id for m in listed] == [kept.id]
    assert _objects(graph, alice, "Bruno") == []
    # the same write goes through once the failure is gone, with its graph rows
    again = service.remember(alice, "Bruno works at Siemens.")
    assert again.created and _objects(graph, alice, "Bruno") == ["works_at:Siemens"]


def test_graph_001_revise_and_restore_replace_the_memory_s_facts(
    service: MemoryService, graph: GraphService, alice: Principal
) -> None:
    """Issue 26 remainder 3: a revision's text feeds the graph; the old text's facts close."""
    m = service.remember(alice, "Anna lives in Berlin.").memory
    service.revise(alice, m.id, "Anna lives in Paris and works at Airbus.")
    assert _objects(graph, alice, "Anna") == ["lives_in:Paris", "works_at:Airbus"]
    every = graph.facts(alice, "Anna", include_invalidated=True).facts
    berlin = next(v.fact for v in every if v.object and v.object.name == "Berlin")
    assert berlin.invalid_at is not None and berlin.memory_version == 1
    assert {v.fact.memory_version for v in every if v.fact.invalid_at is None} == {2}
    GovernanceService(service).restore(ADMIN, m.id, 1, reason="the move was a typo")
    assert _objects(graph, alice, "Anna") == ["lives_in:Berlin"]


def test_graph_001_an_approved_candidate_feeds_the_graph(
    service: MemoryService, graph: GraphService, alice: Principal
) -> None:
    """Issue 26 remainder 3: a candidate has no facts until a reviewer makes it active."""
    c = service.remember(alice, "Clara works at Bosch.", status="candidate").memory
    assert _objects(graph, alice, "Clara") == []
    service.set_status(ADMIN, c.id, "active", reason="checked with Clara")
    assert _objects(graph, alice, "Clara") == ["works_at:Bosch"]


def test_graph_001_imported_memories_feed_the_graph(
    service: MemoryService,
    graph: GraphService,
    alice: Principal,
    make_store: Callable[[str], object],
    local_embedder: LocalEmbedder,
) -> None:
    """Issue 26 remainder 3: an import mirrors each imported current active memory."""
    service.remember(alice, "Dora lives in Madrid.")
    service.remember(alice, "Emil is dating Dora.", status="candidate")
    other = MemoryService(make_store("other.db"), local_embedder, Limits())  # type: ignore[arg-type]
    other.graph = GraphService(other)
    other.import_(ADMIN, service.export(ADMIN))
    assert _objects(other.graph, alice, "Dora") == ["lives_in:Madrid"]
    assert _objects(other.graph, alice, "Emil") == []  # the candidate stays out


def test_graph_001_backfill_reads_an_old_store_once_and_resumes(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    """Issue 26 remainder 3: ``quipu graph backfill`` mirrors memories written before the
    graph existed, only in the scope asked, and a second run writes nothing."""
    service.graph = None  # an old store: no graph at write time
    service.remember(alice, "Fritz works at Siemens.")
    service.remember(alice, "Greta lives in Rome.")
    service.remember(bob, "Hanna lives in Oslo.")
    service.remember(alice, "nothing to name here.")
    graph = GraphService(service)
    assert _objects(graph, alice, "Fritz") == []
    seen: list[int] = []
    first = backfill(graph, "t1", scope=Scope.AGENT, progress=lambda r: seen.append(r.memories))
    assert (first.memories, first.written, first.skipped) == (4, 3, 1)
    assert seen == [] and first.facts == 3
    assert _objects(graph, alice, "Fritz") == ["works_at:Siemens"]
    assert _objects(graph, bob, "Hanna") == ["lives_in:Oslo"]
    again = backfill(graph, "t1", progress=lambda r: seen.append(r.memories), every=2)
    assert (again.written, again.facts, seen) == (0, 0, [2, 4])
    assert [len(graph.facts(alice, "Greta").facts)] == [1]
    assert backfill(graph, "t1", scope=Scope.USER).memories == 0


def test_graph_001_a_write_refused_for_quota_leaves_no_graph_rows(
    make_store: Callable[[str], object],
    local_embedder: LocalEmbedder,
    alice: Principal,
    backend: str,
) -> None:
    """MEM-5 with GRAPH-1: when the store refuses the version (the owner's quota, checked in
    the INSERT itself on PostgreSQL), the mirror queued with it is not written either."""
    service = MemoryService(make_store("q.db"), local_embedder, Limits(quota_per_owner=1))  # type: ignore[arg-type]
    graph = GraphService(service)
    service.graph = graph
    service.remember(alice, "Anna lives in Berlin.")
    with pytest.raises(LimitExceeded):
        service.remember(alice, "Bruno works at Siemens.")
    assert _objects(graph, alice, "Bruno") == []
    assert _count(service, backend, "graph_entities") == 2  # Anna and Berlin
    assert _count(service, backend, "graph_facts") == 1
