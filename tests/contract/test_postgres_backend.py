"""PostgreSQL-only checks (issue 4): cross-process quota and duplicates, the per-scope ANN path,
migrations, and a SQLite <-> PostgreSQL round trip that loses nothing. Each runs on the
throwaway server and on the Citus cluster (issue 30), whose own checks are in test_citus.py."""

from __future__ import annotations

import io
import multiprocessing
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from quipu import transfer
from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import Kind, Principal, Scope, ScopeRef, Status
from quipu.errors import ConfigurationError, LimitExceeded
from quipu.memories import MemoryService
from quipu.retrieval.bm25 import TOKENIZER_VERSION
from quipu.storage.postgres.migrate import available, migrate, pending
from quipu.storage.postgres.search import SearchPlan, track_terms
from quipu.storage.postgres.store import PostgresStore
from quipu.storage.sqlite.store import SQLiteStore
from tests.conftest import CITUS_URL, PG_URL, schema_url
from tests.contract.test_scale_gate import PIN, memory, unit
from tests.support.pg import drop_schema, new_schema

NEEDS_PG = [
    pytest.mark.postgres,
    pytest.mark.skipif(PG_URL is None, reason="needs QUIPU_TEST_DATABASE_URL (make test sets it)"),
]
NEEDS_CITUS = [
    pytest.mark.citus,
    pytest.mark.skipif(CITUS_URL is None, reason="needs QUIPU_TEST_CITUS_URL (make test sets it)"),
]
SHARED = ScopeRef("t1", Scope.AGENT, "shared-owner")


@pytest.fixture(
    params=[pytest.param("postgres", marks=NEEDS_PG), pytest.param("citus", marks=NEEDS_CITUS)]
)
def schema(request: pytest.FixtureRequest) -> Any:
    """A fresh schema: empty on the throwaway server (the store migrates it), or on Citus
    migrated by ``quipu migrate --citus``."""
    if request.param == "citus":
        pool = request.getfixturevalue("citus_schemas")
        url = pool.take()
        yield url
        pool.give_back(url)
        return
    assert PG_URL is not None
    name = new_schema(PG_URL, f"t_{uuid.uuid4().hex[:12]}")
    yield schema_url(PG_URL, name)
    drop_schema(PG_URL, name)


@pytest.fixture
def empty_schema() -> Any:
    assert PG_URL is not None
    name = new_schema(PG_URL, f"t_{uuid.uuid4().hex[:12]}")
    yield schema_url(PG_URL, name)
    drop_schema(PG_URL, name)


# -- MEM-5 / MEM-6 across processes ------------------------------------------------------------


def _writer(url: str, texts: list[str], quota: int, barrier: Any, out: Any) -> None:
    store = PostgresStore(url, max_connections=1)
    created = refused = 0
    barrier.wait(timeout=60)
    for text in texts:
        m = memory("shared-owner", text, datetime.now(UTC))
        try:
            created += int(store.insert(SHARED, m, None, None, quota).created)
        except LimitExceeded:
            refused += 1
    store.close()
    out.put((created, refused))


def _run_writers(url: str, batches: list[list[str]], quota: int) -> list[tuple[int, int]]:
    PostgresStore(url).close()  # migrate once, before the race
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(batches))
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, b, quota, barrier, out)) for b in batches]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_mem_005_two_processes_never_exceed_the_quota(schema: str) -> None:
    batches = [[f"process {n} fact {i}" for i in range(40)] for n in range(2)]
    results = _run_writers(schema, batches, quota=50)
    assert sum(created for created, _ in results) == 50
    assert sum(refused for _, refused in results) == 30
    store = PostgresStore(schema)
    assert store.count_live(SHARED) == 50
    assert len(store.list_page(SHARED, Filters(), None, 200).items) == 50
    store.close()


def test_mem_006_two_processes_writing_the_same_texts_store_each_once(schema: str) -> None:
    same = [f"the same fact number {i}" for i in range(30)]
    results = _run_writers(schema, [same, list(reversed(same))], quota=10_000)
    assert sum(created for created, _ in results) == 30
    store = PostgresStore(schema)
    assert store.count_live(SHARED) == 30
    store.close()


def _taker(url: str, barrier: Any, out: Any) -> None:
    store = PostgresStore(url, max_connections=1)
    barrier.wait(timeout=60)
    admitted = sum(
        store.take_rate_token("shared-key", 0.001, 10, datetime.now(UTC)) == 0.0 for _ in range(15)
    )
    store.close()
    out.put(admitted)


def test_mem_005_rate_limit_bucket_is_shared_by_two_processes(schema: str) -> None:
    PostgresStore(schema).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_taker, args=(schema, barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    admitted = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(admitted) == 10  # the burst, once, between both processes


# -- RECALL-5 beyond the exact limit: the scope's own ANN index ---------------------------------


def test_recall_005_large_scope_uses_its_own_ann_index(schema: str) -> None:
    store = PostgresStore(schema, search_plan=SearchPlan(exact_limit=2_000, ef_search=100))
    rng = np.random.default_rng(7)
    big, small = unit(rng, 6_000), unit(rng, 3_000)
    now = datetime.now(UTC)
    rows = [(memory("big", f"big {i}", now), big[i]) for i in range(len(big))]
    rows += [(memory(f"small-{i % 3}", f"small {i}", now), small[i]) for i in range(len(small))]
    store.import_versions(rows)
    store.pin_embedding(PIN)
    ref = ScopeRef("t1", Scope.AGENT, "big")
    q = unit(rng, 1)[0]
    _, pending_info = store.vector_candidates(ref, q, Filters(), 10)
    assert pending_info.path == "exact-btree:ann-index-pending"
    assert len(store.ensure_ann_indexes()) == 1  # only the scope above the limit
    assert store.ensure_ann_indexes() == []  # idempotent

    recalls = []
    near = big[:20] + 0.05 * unit(rng, 20)
    for q in (near / np.linalg.norm(near, axis=1, keepdims=True)).astype(np.float32):
        found, info = store.vector_candidates(ref, q, Filters(), 10)
        assert info.path == "hnsw-scope+rerank"
        truth = set(np.argsort(-(big @ q))[:10])
        ids = {m.id for m in store.load([c.key for c in found]).values()}
        recalls.append(len(ids & {rows[t][0].id for t in truth}) / 10)
        assert all(rows[0][0].owner == m.owner for m in store.load([c.key for c in found]).values())
    assert np.mean(recalls) >= 0.9, recalls
    # a small scope of the same table stays exact
    _, info = store.vector_candidates(ScopeRef("t1", Scope.AGENT, "small-0"), q, Filters(), 10)
    assert info.path == "exact-btree"
    # a filter too selective for the index walk falls back to the exact path, never short
    found, info = store.vector_candidates(ref, q, Filters(kinds=frozenset({Kind.DECISION})), 10)
    assert found == [] and info.path == "hnsw-scope-short:exact-btree"
    store.close()


def test_recall_005_a_filtered_walk_of_the_scope_index_keeps_going_until_it_has_k(
    schema: str,
) -> None:
    """A filter a tenth of the scope passes: the index walk runs on (pgvector's iterative scan,
    ``hnsw.iterative_scan`` set for the search's transaction) until it has its candidates, and
    answers from the index. On Citus the walk runs on the worker, which sees only SET LOCAL
    settings and only with ``citus.propagate_set_commands = local`` (issue 30): before that the
    worker walked ``ef_search = 40`` rows without iterating, came back short and every filtered
    recall of a large scope fell back to the exact scan."""
    store = PostgresStore(schema, search_plan=SearchPlan(exact_limit=1_000))
    rng = np.random.default_rng(11)
    vectors = unit(rng, 3_000)
    now = datetime.now(UTC)
    rows = [
        (replace(memory("big", f"note {i}", now), tags=("x",) if i % 10 == 0 else ()), vectors[i])
        for i in range(len(vectors))
    ]
    store.import_versions(rows)
    store.pin_embedding(PIN)
    assert len(store.ensure_ann_indexes()) == 1
    ref = ScopeRef("t1", Scope.AGENT, "big")
    tagged = [i for i in range(len(vectors)) if i % 10 == 0]
    hits = 0
    for q in unit(rng, 5):
        found, info = store.vector_candidates(ref, q, Filters(tags=frozenset({"x"})), 10)
        assert info.path == "hnsw-scope+rerank", info
        ids = {m.id for m in store.load([c.key for c in found]).values()}
        truth = {rows[tagged[t]][0].id for t in np.argsort(-(vectors[tagged] @ q))[:10]}
        hits += len(ids & truth)
        assert all("x" in m.tags for m in store.load([c.key for c in found]).values())
    assert hits >= 45, hits
    store.close()


# -- full text beyond the exact limit: MaxScore, bounded, and term statistics --------------------


def test_recall_001_large_scope_text_is_exact_when_provable_and_labelled_when_bounded(
    schema: str,
) -> None:
    plan = SearchPlan(text_exact_matches=100, text_budget=40)
    store = PostgresStore(schema, search_plan=plan)
    now = datetime.now(UTC)
    rows = [(memory("o", f"garden note {i} about tomatoes", now), None) for i in range(300)]
    rows += [
        (memory("o", f"garden note about the rare orchid number {i}", now), None) for i in range(5)
    ]
    store.import_versions(rows)  # 305 versions > 100: the scope keeps term statistics
    ref = ScopeRef("t1", Scope.AGENT, "o")
    exact = PostgresStore(schema, search_plan=SearchPlan(text_exact_matches=10**9))

    found, info = store.text_candidates(ref, "rare orchid garden", Filters(), 5)
    assert info.path == "bm25-tsvector+maxscore"
    assert found == exact.text_candidates(ref, "rare orchid garden", Filters(), 5)[0]
    assert {m.text for m in store.load([c.key for c in found]).values()} == {
        t[0].text for t in rows[300:]
    }

    found, info = store.text_candidates(ref, "garden tomatoes", Filters(), 10)
    assert info.path == "bm25-tsvector:bounded" and len(found) == 10
    # writes after the statistics were started keep them current
    store.insert(ref, memory("o", "orchid orchid orchid", now), None, None, 10**6)
    with psycopg.connect(schema) as conn:
        df = conn.execute("SELECT df FROM scope_terms WHERE lexeme = 'orchid'").fetchone()
    assert df == (6,)
    small, info = exact.text_candidates(ScopeRef("t1", Scope.AGENT, "nobody"), "x", Filters(), 5)
    assert small == [] and info.path == "bm25-tsvector"
    store.close()
    exact.close()


def test_recall_001_small_scope_text_in_one_statement_scores_like_term_statistics(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small scope without term statistics counts document frequencies and scores in one
    statement; its page equals the one the statistics path gives (filtered-out and stale rows
    still count in df, as scope_terms does)."""
    store = PostgresStore(schema)
    now = datetime.now(UTC)
    texts = [f"garden note {i} about tomatoes and basil" for i in range(30)]
    texts += ["the rare orchid in the garden", "orchid orchid care", "basil pesto recipe"]
    texts += ["watering at night"]
    rows = [(memory("o", text, now), None) for text in texts]
    rows += [(replace(memory("o", "stale garden orchid", now), status=Status.STALE), None)]
    rows += [(replace(memory("o", "tagged orchid garden", now), tags=("x",)), None)]
    store.import_versions(rows)
    ref = ScopeRef("t1", Scope.AGENT, "o")
    queries = [("orchid garden", Filters()), ("tomatoes basil", Filters())]
    queries += [("orchid", Filters(tags=frozenset({"x"}))), ("nothing matches", Filters())]
    queries += [("orchid", Filters(kinds=frozenset({Kind.PREFERENCE})))]  # matches, none pass
    expansion = [0.0] * len(queries) + [0.3]  # weighted keys: "evening" also finds "night"
    queries += [("evening", Filters())]
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def counting(conn: psycopg.Connection[Any], query: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(query))
        return execute(conn, query, *args, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    small = [
        store.text_candidates(ref, q, flt, 8, expansion=e)
        for (q, flt), e in zip(queries, expansion, strict=True)
    ]
    monkeypatch.undo()
    # per query: the scope's statistics, then one statement that counts and scores
    assert len(sent) == 2 * len(queries)
    keys = ["orchid", "garden", "basil", "absent"]
    counted = store.key_frequencies(ref, keys)  # counted now, as small_scope_bm25 does
    with psycopg.connect(schema) as conn:
        track_terms(conn, ref)
    assert store.key_frequencies(ref, keys) == counted  # read from scope_terms
    assert counted[1]["basil"] > counted[1]["orchid"] > 0 and "absent" not in counted[1]
    tracked = [
        store.text_candidates(ref, q, flt, 8, expansion=e)
        for (q, flt), e in zip(queries, expansion, strict=True)
    ]
    for (found, info), (want, want_info) in zip(small, tracked, strict=True):
        assert [c.key for c in found] == [c.key for c in want]
        assert [c.score for c in found] == pytest.approx([c.score for c in want], rel=1e-9)
        assert (info.path, info.scanned) == (want_info.path, want_info.scanned)
    assert len(small[0][0]) == 8 and small[2][0] and not small[4][0] and small[4][1].scanned == 4
    assert len(small[5][0]) == 1  # only the expansion key matches
    store.close()


def test_keys_written_by_an_older_tokenizer_are_recomputed_when_opened(
    schema: str, local_embedder: Any, alice: Principal
) -> None:
    """As on SQLite (test_terms_refresh.py): the first store to open a database whose BM25 keys
    an older tokenizer wrote recomputes every row's keys and each scope's length, under a lock
    on scope_state (on Citus: a multi-shard UPDATE whose subquery stays on each shard)."""
    svc = MemoryService(PostgresStore(schema), local_embedder, Limits())
    svc.remember(alice, "we went hiking near the lake", observed_at="2023-05-08T10:00:00Z")
    svc.remember(bob_of(alice), "another scope, also near a lake")
    svc.store.close()
    with psycopg.connect(schema, autocommit=True) as raw:  # what version 1 stored: no date keys
        raw.execute("UPDATE memory_versions SET terms = 'went:1 hike:2 near:3 lake:4'")
        raw.execute("UPDATE memory_versions SET term_count = 4")
        raw.execute("UPDATE scope_state SET term_total = 1")
        raw.execute("UPDATE store_meta SET value = '1' WHERE key = 'terms_version'")
    store = PostgresStore(schema)
    ref = ScopeRef("t1", Scope.AGENT, "alice")
    found, _ = store.text_candidates(ref, "in May 2023", Filters(), 10)
    assert len(found) == 1
    with psycopg.connect(schema) as raw:
        terms = raw.execute(
            "SELECT terms::text FROM memory_versions WHERE owner = 'alice'"
        ).fetchone()
        totals = raw.execute(
            "SELECT s.term_total = (SELECT sum(term_count) FROM memory_versions m"
            " WHERE m.tenant_id = s.tenant_id AND m.scope = s.scope AND m.owner = s.owner)"
            " FROM scope_state s"
        ).fetchall()
        version = raw.execute("SELECT value FROM store_meta WHERE key = 'terms_version'").fetchone()
    assert terms is not None and "'may'" in terms[0] and "'2023'" in terms[0]
    assert totals == [(True,), (True,)] and version == (TOKENIZER_VERSION,)
    store.close()


def bob_of(alice: Principal) -> Principal:
    return replace(alice, agent_id="bob", key_id="key-bob")


# -- migrations and Citus ----------------------------------------------------------------------


@pytest.mark.parametrize("_", [pytest.param("postgres", marks=NEEDS_PG)])
def test_migrations_are_numbered_recorded_and_idempotent(empty_schema: str, _: str) -> None:
    schema = empty_schema
    numbers = [n for n, _, _ in available()]
    assert numbers == sorted(numbers) and numbers[0] == 1
    with psycopg.connect(schema) as conn:
        assert pending(conn) == numbers
        assert migrate(conn).applied == numbers
        assert migrate(conn).applied == [] and pending(conn) == []
        recorded = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        assert sorted(recorded) == numbers
        # tenant_id leads every primary key and btree/GIN index of the tenant tables
        rows = conn.execute(
            "SELECT i.indexrelid::regclass::text, a.attname FROM pg_index i"
            " JOIN pg_class t ON t.oid = i.indrelid JOIN pg_attribute a"
            " ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " WHERE t.relnamespace = current_schema()::regnamespace"
            " AND t.relname NOT IN ('schema_migrations', 'store_meta', 'tenant_keys', 'jobs',"
            " 'credentials', 'tenants', 'rate_buckets')"
        ).fetchall()
        assert rows and {column for _, column in rows} == {"tenant_id"}, rows


@pytest.mark.parametrize("_", [pytest.param("postgres", marks=NEEDS_PG)])
def test_migrate_citus_without_the_extension_is_a_clear_error(empty_schema: str, _: str) -> None:
    with psycopg.connect(empty_schema) as conn, pytest.raises(ConfigurationError, match="Citus"):
        migrate(conn, citus=True)


# -- issue 4 item 6: SQLite -> PostgreSQL -> SQLite loses nothing ---------------------------------


def test_api_004_sqlite_to_postgres_and_back_is_lossless(
    schema: str, tmp_path: Path, local_embedder: Any, alice: Principal
) -> None:
    from tests.contract.test_transfer_contract import _populate

    def snapshot(svc: MemoryService) -> list[tuple[dict[str, object], bytes | None]]:
        return [
            (m.to_dict(), None if v is None else np.asarray(v).tobytes())
            for m, v in svc.export(alice)
        ]

    def through(source: MemoryService, target: MemoryService) -> None:
        buffer = io.StringIO()
        list(transfer.write(buffer, source.export(alice)))
        target.import_(alice, transfer.read(io.StringIO(buffer.getvalue())))

    lite = MemoryService(SQLiteStore(tmp_path / "a.db"), local_embedder, Limits())
    _populate(lite, alice)
    pg = MemoryService(PostgresStore(schema), local_embedder, Limits())
    through(lite, pg)
    back = MemoryService(SQLiteStore(tmp_path / "b.db"), local_embedder, Limits())
    through(pg, back)
    assert snapshot(lite) == snapshot(pg) == snapshot(back)
    q = "where does Dana sit"
    assert [h.memory.id for h in pg.recall(alice, q).results] == [
        h.memory.id for h in lite.recall(alice, q).results
    ]
    for svc in (lite, pg, back):
        svc.store.close()
