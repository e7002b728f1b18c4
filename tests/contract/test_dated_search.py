"""Dated questions (issue 23 finding 1): a search restricted to an observation window is exact,
and on PostgreSQL its plan follows the window's size — nothing searched when the window is
empty, the exact scan of its rows when it is narrow, the scope's HNSW index only when wide.

Before the plan choice, a narrow window in a large scope walked the scope's HNSW index with a
filter that rejected nearly every row, came back short, and then scanned the whole scope
exactly (``hnsw-scope-short:exact-btree``): 63 % of all recall time at 100k rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from quipu.core.query import Filters
from quipu.core.records import Scope, ScopeRef
from quipu.storage.postgres.search import SearchPlan
from quipu.storage.postgres.store import PostgresStore
from tests.conftest import CITUS_URL, PG_URL, schema_url
from tests.contract.test_scale_gate import PIN, memory, unit
from tests.support.pg import drop_schema, new_schema

ROWS = 3_000
START = datetime(2020, 1, 1, tzinfo=UTC)
REF = ScopeRef("t1", Scope.AGENT, "dated")


def _rows(rng: np.random.Generator) -> tuple[list[Any], Any]:
    """``ROWS`` rows in one scope, one observed every day from ``START``."""
    vectors = unit(rng, ROWS)
    now = datetime.now(UTC)
    rows = [
        (replace(memory(REF.owner, f"day {i}", now), observed_at=START + timedelta(days=i)), v)
        for i, v in enumerate(vectors)
    ]
    return rows, vectors


def _window(first: int, days: int) -> Filters:
    return Filters(
        observed_after=START + timedelta(days=first),
        observed_before=START + timedelta(days=first + days),
    )


def _truth(rows: list[Any], vectors: Any, q: Any, first: int, days: int, k: int) -> list[str]:
    inside = [i for i in range(len(rows)) if first <= i < first + days]
    order = sorted(inside, key=lambda i: -float(vectors[i] @ q))[:k]
    return [rows[i][0].id for i in order]


def _ids(store: Any, found: list[Any]) -> list[str]:
    loaded = store.load([c.key for c in found])
    return [loaded[c.key].id for c in found]


def test_recall_005_issue23_dated_window_search_is_exact(make_store: Any) -> None:
    """Every backend: the top-k inside a window is the exact top-k of the window's rows, for a
    narrow window, a wide one, and none for an empty one."""
    rng = np.random.default_rng(23)
    rows, vectors = _rows(rng)
    store = make_store()
    store.import_versions(rows)
    store.pin_embedding(PIN)
    for q in unit(rng, 4):
        for first, days in ((100, 40), (10, 2_500), (5_000, 30)):
            found, _ = store.vector_candidates(REF, q, _window(first, days), 10)
            assert _ids(store, found) == _truth(rows, vectors, q, first, days, 10)


NEEDS_PG = pytest.mark.skipif(PG_URL is None, reason="needs QUIPU_TEST_DATABASE_URL")
NEEDS_CITUS = pytest.mark.skipif(CITUS_URL is None, reason="needs QUIPU_TEST_CITUS_URL")


@pytest.fixture(
    params=[pytest.param("postgres", marks=NEEDS_PG), pytest.param("citus", marks=NEEDS_CITUS)]
)
def schema(request: pytest.FixtureRequest) -> Iterator[str]:
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


def test_recall_005_issue23_window_plan_follows_its_size_on_postgres(schema: str) -> None:
    """A scope above ``exact_limit`` with its ANN index built: an empty window is not
    searched, a narrow one is scanned exactly (its rows only), a wide one walks the index."""
    store = PostgresStore(schema, search_plan=SearchPlan(exact_limit=1_000))
    rng = np.random.default_rng(7)
    rows, vectors = _rows(rng)
    store.import_versions(rows)
    store.pin_embedding(PIN)
    assert len(store.ensure_ann_indexes()) == 1
    q = unit(rng, 1)[0]

    found, info = store.vector_candidates(REF, q, _window(5_000, 30), 10)
    assert (found, info.path, info.scanned) == ([], "window-empty", 0)

    found, info = store.vector_candidates(REF, q, _window(100, 40), 10)
    assert (info.path, info.scanned) == ("exact-window", 40)
    assert _ids(store, found) == _truth(rows, vectors, q, 100, 40, 10)

    _, info = store.vector_candidates(REF, q, _window(0, 2_500), 10)
    assert info.path == "hnsw-scope+rerank"
    # as_of reads any version valid then, not only current ones: never the window count
    at = Filters(as_of=datetime.now(UTC), observed_after=START, observed_before=START)
    _, info = store.vector_candidates(REF, q, at, 10)
    assert info.path == "exact-btree"
    store.close()
