"""The pure parts of merged recall (issue 25, RECALL-9): diversity selection, budget fit, the
answer-confidence verdict and the query memo."""

from __future__ import annotations

import numpy as np

from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.memo import QueryMemo
from quipu.retrieval.selection import Knobs, Pooled, answer_confidence, diversify, fit_budget


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_recall_009_a_row_without_a_vector_is_never_dropped_as_similar() -> None:
    same = _unit(1, 0)
    pool = [
        Pooled("a", 0.9, "ha", same),
        Pooled("b", 0.8, "hb", same),  # a copy of a: dropped
        Pooled("c", 0.7, "hc", None),  # unmeasurable: kept
        Pooled("d", 0.6, "hd", _unit(0, 1)),
    ]
    chosen, counts = diversify(pool, 3, frozenset(), Knobs(lam=1.0))
    assert chosen == ["a", "c", "d"]
    assert counts["dropped_near_duplicates"] == 1 and counts["vectors_available"] == 3


def test_recall_009_exact_duplicates_collapse_and_empty_prints_do_not() -> None:
    pool = [
        Pooled("a", 0.9, "h", None),
        Pooled("b", 0.8, "h", None),
        Pooled("c", 0.7, "", None),
        Pooled("d", 0.6, "", None),
    ]
    chosen, counts = diversify(pool, 4, frozenset(), Knobs())
    assert chosen == ["a", "c", "d"] and counts["dropped_exact_duplicates"] == 1


def test_recall_009_seen_rows_come_back_before_a_hole() -> None:
    pool = [Pooled(i, 1.0 - n / 10, i, None) for n, i in enumerate("abc")]
    chosen, counts = diversify(pool, 2, frozenset({"a", "b"}), Knobs())
    assert chosen == ["a", "c"]
    assert counts["readmitted_already_seen"] == 1 and counts["dropped_already_seen"] == 1


def test_recall_009_budget_skips_a_big_row_keeps_a_small_one() -> None:
    rows = [
        {"id": "a", "tokens_estimate": 5},
        {"id": "b", "tokens_estimate": 50},
        {"id": "c", "tokens_estimate": 4},
    ]
    kept, cut = fit_budget(rows, 10)
    assert [r["id"] for r in kept] == ["a", "c"] and [r["id"] for r in cut] == ["b"]


def test_recall_009_answer_confidence_is_separation_not_a_floor() -> None:
    assert answer_confidence([]) == ("none", None)
    assert answer_confidence([0.3, 0.1, 0.1, 0.11, 0.09])[0] == "answer"
    assert answer_confidence([0.9, 0.89, 0.88, 0.9])[0] == "none"
    # the same shape at another scale gives the same verdict
    assert answer_confidence([3.0, 1.0, 1.0, 1.1, 0.9])[0] == "answer"


def test_recall_009_query_memo_embeds_a_query_once(local_embedder: LocalEmbedder) -> None:
    memo = QueryMemo(local_embedder)
    first = memo.embed_query("where is the staging VPN?")
    assert np.allclose(first, local_embedder.embed_query("where is the staging VPN?"))
    assert memo.embed_query("where is the staging VPN?") is not None
    assert len(memo._found) == 1
