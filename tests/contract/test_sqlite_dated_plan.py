"""SQLite dated questions (issue 23 finding 1): a search restricted to an observation window
counts the window first (an empty one is not searched), checks the other filters and scores
only the window's rows when it is narrow, and reads the scope's BM25 and vector scores the
recall's undated searches already computed instead of a second pass over the scope -- with
the same results (RECALL-5: exact top-k of the window's rows).

Before, each dated recall evaluated every filter over the whole scope five times and scored
the whole scope's postings twice: at 100k rows a dated recall took 1.3x (p50) to 1.5x (p95)
an undated one (quiet run of main, docs/benchmarks.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quipu.core.query import Filters
from quipu.core.records import Kind, Scope, ScopeRef, Source, Status
from quipu.retrieval.bm25 import Postings
from quipu.storage.sqlite.scope_index import Row, ScopeIndex
from quipu.storage.sqlite.store import SQLiteStore
from quipu.storage.sqlite.vectors import Vectors
from quipu.storage.timecodec import to_micros
from tests.contract.test_scale_gate import DIM, PIN, memory, unit

ROWS = 3_000
START = datetime(2020, 1, 1, tzinfo=UTC)
REF = ScopeRef("t1", Scope.AGENT, "dated-plan")
WORDS = ["lake", "coffee", "deploy", "report", "garden", "violin", "harbor"]


def _text(i: int) -> str:
    return f"{WORDS[i % 7]} {WORDS[(i * 3 + 1) % 7]} note {i}"


def _window(first: int, days: int) -> Filters:
    return Filters(
        observed_after=START + timedelta(days=first),
        observed_before=START + timedelta(days=first + days),
    )


@pytest.fixture(scope="module")
def dated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SQLiteStore, Any]]:
    """One scope of ``ROWS`` rows, one observed every day from ``START``."""
    rng = np.random.default_rng(2023)
    vectors = unit(rng, ROWS)
    now = datetime.now(UTC)
    rows = [
        (replace(memory(REF.owner, _text(i), now), observed_at=START + timedelta(days=i)), v)
        for i, v in enumerate(vectors)
    ]
    store = SQLiteStore(Path(tmp_path_factory.mktemp("dated-plan")) / "dated.db")
    store.import_versions(rows)
    store.pin_embedding(PIN)
    yield store, vectors
    store.close()


def _days(store: SQLiteStore, found: list[Any]) -> list[int]:
    """Each candidate's row number (its day since ``START``)."""
    loaded = store.load([c.key for c in found])
    return [int(loaded[c.key].text.rsplit(" ", 1)[1]) for c in found]


def test_recall_005_issue23_sqlite_window_plan_follows_its_size(
    dated: tuple[SQLiteStore, Any],
) -> None:
    """An empty window is not searched; a narrow one scores its own rows only; a wide one reads
    the scope's scores; each returns the exact top-k of the window's rows, by vector and by
    keyword (the keyword ranking is the scope's BM25 restricted to the window)."""
    store, vectors = dated
    q = unit(np.random.default_rng(5), 1)[0]
    for search in (
        lambda flt: store.vector_candidates(REF, q, flt, 10),
        lambda flt: store.text_candidates(REF, "lake harbor", flt, 10),
    ):
        found, info = search(_window(5_000, 30))
        assert (found, info.path, info.scanned) == ([], "window-empty", 0)

    for first, days, path in ((100, 40, "exact-window"), (10, 2_500, "exact-numpy")):
        found, info = store.vector_candidates(REF, q, _window(first, days), 10)
        truth = sorted(range(first, first + days), key=lambda i: -float(vectors[i] @ q))[:10]
        assert (info.path, info.scanned, _days(store, found)) == (path, days, truth)

    scope, _ = store.text_candidates(REF, "lake harbor", Filters(), ROWS)
    for first, days in ((100, 40), (10, 2_500)):
        found, info = store.text_candidates(REF, "lake harbor", _window(first, days), 10)
        inside = [c for c in scope if first <= _days(store, [c])[0] < first + days]
        assert info.path == "bm25-window"
        assert [c.score for c in found] == [c.score for c in inside[:10]]
        cut = found[-1].score  # rows tied at the cut may be any of them, as on the scope
        assert {c.key for c in found if c.score > cut} == {
            c.key for c in inside[:10] if c.score > cut
        }


def test_issue23_a_dated_search_reads_the_scope_pass_of_its_recall(
    dated: tuple[SQLiteStore, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword and vector searches inside a window score no row again that the recall's
    search of the whole scope, with the same keys and vector, already scored."""
    store, _ = dated
    passes: Counter[str] = Counter()
    for owner, name, label in ((Postings, "scores", "bm25"), (Vectors, "scores", "vectors")):
        real = getattr(owner, name)

        def counted(*args: Any, _real: Any = real, _label: str = label, **kw: Any) -> Any:
            passes[_label] += 1
            return _real(*args, **kw)

        monkeypatch.setattr(owner, name, counted)
    q = unit(np.random.default_rng(11), 1)[0]
    whole, _ = store.text_candidates(REF, "garden violin", Filters(), 10)
    inside, _ = store.text_candidates(REF, "garden violin", _window(10, 2_500), 10)
    near, _ = store.vector_candidates(REF, q, Filters(), 10)
    near_inside, _ = store.vector_candidates(REF, q, _window(10, 2_500), 10)
    assert whole and inside and near and near_inside
    assert passes == {"bm25": 1, "vectors": 1}


def _row(key: int, day: int, valid_at: int) -> Row:
    return Row(
        key=key,
        family=f"m{key}",
        version=1,
        is_current=True,
        status=Status.ACTIVE,
        valid_at=valid_at,
        valid_to=None,
        observed_at=to_micros(START + timedelta(days=day)),
        kind=Kind.FACT,
        source=Source.EXPLICIT,
        confidence=1.0,
        project=None,
        terms=["note", f"d{day}"],
        session=None,
    )


def test_issue23_window_order_and_kept_masks_follow_writes_and_time() -> None:
    """A row written after the window's time order was built is found in its window; a
    retired one is gone; a row that becomes valid later appears once that instant passes,
    though no row changed in between (the kept filter mask holds only until then)."""
    rng = np.random.default_rng(3)
    t0 = to_micros(datetime(2026, 1, 1, tzinfo=UTC))
    index = ScopeIndex(DIM, 0)
    for i, v in enumerate(unit(rng, 600)):
        index.add(_row(i, i, t0), v)
    q = unit(rng, 1)[0]
    window = _window(100, 40)

    def found(at: int, flt: Filters) -> tuple[list[int], list[int]]:
        near, _, _ = index.search(q, flt, 5, at)
        words, _, _ = index.search_text({"d110": 1.0}, flt, 5, at)
        return [c.key for c in near], [c.key for c in words]

    for flt in (Filters(), window):  # the scope's masks and the window's time order built
        assert found(t0 + 1, flt)[1] == [110]
    index.add(_row(10_000, 110, t0), q)
    for flt in (Filters(), window):
        near, words = found(t0 + 1, flt)
        assert (near[0], words) == (10_000, [110, 10_000])
    index.retire(10_000, t0 + 2)
    for flt in (Filters(), window):
        near, words = found(t0 + 3, flt)
        assert 10_000 not in near and words == [110]
    index.add(_row(20_000, 120, t0 + 1_000), q)  # valid from a later instant
    for flt in (Filters(), window):
        assert 20_000 not in found(t0 + 500, flt)[0]
    for flt in (Filters(), window):
        assert found(t0 + 2_000, flt)[0][0] == 20_000
