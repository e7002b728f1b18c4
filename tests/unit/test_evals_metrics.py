"""Retrieval metrics, the aggregator, the baselines and token counting (EVAL-2, EVAL-3).

Expected values are worked by hand in the comments, so a wrong formula fails here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from quipu.errors import ConfigurationError
from quipu.evals.baselines import BM25Baseline, DenseBaseline
from quipu.evals.metrics import (
    QuestionResult,
    mrr,
    ndcg_at_k,
    percentile,
    precision_at_k,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    score_question,
    sessions_from_ranked_turns,
    summarise,
)
from quipu.evals.tokens import count_tokens

RANKED = ["t1", "t2", "t3", "t4"]
GOLD = {"t2", "t4"}


# --- sessions from turns -----------------------------------------------------------------


def test_sessions_keep_first_occurrence_order() -> None:
    turn_to_session = {"a1": "A", "b1": "B", "a2": "A", "c1": "C", "b2": "B"}
    ranked = ["b1", "a2", "a1", "b2", "c1"]
    assert sessions_from_ranked_turns(ranked, turn_to_session) == ["B", "A", "C"]


def test_sessions_work_with_int_sessions() -> None:
    assert sessions_from_ranked_turns(
        ["D3:1", "D1:2", "D3:4"], {"D3:1": 3, "D1:2": 1, "D3:4": 3}
    ) == [
        3,
        1,
    ]


def test_sessions_reject_an_unknown_turn() -> None:
    with pytest.raises(ValueError, match="no session"):
        sessions_from_ranked_turns(["x"], {"a": "A"})


# --- recall ------------------------------------------------------------------------------


def test_recall_all_needs_every_gold_item_within_k() -> None:
    # gold sits at ranks 2 and 4
    assert recall_all_at_k(RANKED, GOLD, 1) == 0.0
    assert recall_all_at_k(RANKED, GOLD, 3) == 0.0
    assert recall_all_at_k(RANKED, GOLD, 4) == 1.0
    assert recall_all_at_k(RANKED, GOLD, 10) == 1.0


def test_recall_any_needs_one_gold_item_within_k() -> None:
    assert recall_any_at_k(RANKED, GOLD, 1) == 0.0
    assert recall_any_at_k(RANKED, GOLD, 2) == 1.0


def test_recall_fraction() -> None:
    assert recall_at_k(RANKED, GOLD, 2) == 0.5
    assert recall_at_k(RANKED, GOLD, 4) == 1.0
    assert recall_at_k(RANKED, {"t1", "t3", "x"}, 3) == pytest.approx(2 / 3)


def test_gold_missing_from_the_ranking_never_counts() -> None:
    assert recall_all_at_k(RANKED, {"t1", "zz"}, 10) == 0.0
    assert recall_any_at_k(RANKED, {"t1", "zz"}, 10) == 1.0


# --- precision, nDCG, MRR ------------------------------------------------------------------


def test_precision_divides_by_k() -> None:
    assert precision_at_k(RANKED, GOLD, 1) == 0.0
    assert precision_at_k(RANKED, GOLD, 2) == 0.5
    assert precision_at_k(RANKED, GOLD, 4) == 0.5
    # a ranking shorter than k still divides by k: 1 hit / 5
    assert precision_at_k(["t2"], GOLD, 5) == pytest.approx(0.2)
    # a repeated hit counts once: 1 distinct hit / 2
    assert precision_at_k(["t2", "t2"], GOLD, 2) == 0.5


def test_ndcg_binary_gains_standard_discount() -> None:
    # DCG = 1/log2(3) + 1/log2(5) = 1.0616063; IDCG = 1 + 1/log2(3) = 1.6309298
    assert ndcg_at_k(RANKED, GOLD, 4) == pytest.approx(0.6509209298, abs=1e-9)
    # only rank 2 inside k=2: (1/log2 3) / (1 + 1/log2 3)
    assert ndcg_at_k(RANKED, GOLD, 2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(RANKED, GOLD, 1) == 0.0
    assert ndcg_at_k(["t2", "t4", "t1"], GOLD, 3) == pytest.approx(1.0)


def test_ndcg_ideal_is_capped_at_k() -> None:
    # three gold items, k = 2: the ideal DCG has two gains, so two hits is perfect
    assert ndcg_at_k(["a", "b"], {"a", "b", "c"}, 2) == pytest.approx(1.0)


def test_ndcg_counts_a_repeated_item_once() -> None:
    # gains 1, 0 (repeat), 1 at rank 3: DCG = 1 + 1/2 = 1.5; IDCG = 1 + 1/log2(3)
    assert ndcg_at_k(["t2", "t2", "t4"], GOLD, 3) == pytest.approx(0.9197207891, abs=1e-9)


def test_mrr_is_the_reciprocal_rank_of_the_first_hit() -> None:
    assert mrr(RANKED, GOLD) == 0.5
    assert mrr(RANKED, {"t3"}) == pytest.approx(1 / 3)
    assert mrr(RANKED, {"t1", "t4"}) == 1.0
    assert mrr(RANKED, {"nope"}) == 0.0


@pytest.mark.parametrize(
    "metric", [recall_all_at_k, recall_any_at_k, recall_at_k, precision_at_k, ndcg_at_k]
)
def test_metrics_refuse_empty_gold_and_bad_k(metric: object) -> None:
    assert callable(metric)
    with pytest.raises(ValueError, match="gold is empty"):
        metric(RANKED, set(), 5)
    with pytest.raises(ValueError, match="k must be"):
        metric(RANKED, GOLD, 0)


def test_mrr_refuses_empty_gold() -> None:
    with pytest.raises(ValueError, match="gold is empty"):
        mrr(RANKED, set())


# --- percentile --------------------------------------------------------------------------


def test_percentile_interpolates_linearly() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 2.5  # position 1.5 between 2 and 3
    assert percentile(values, 90) == pytest.approx(3.7)  # position 2.7 between 3 and 4
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 95) == 7.0


def test_percentile_agrees_with_numpy() -> None:
    values = [float(v) for v in np.random.default_rng(7).normal(size=101)]
    for p in (1, 25, 50, 95, 99):
        assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


# --- per-question scoring and aggregation -----------------------------------------------


def _result(
    question_id: str, category: str, ranked_sessions: Sequence[int], gold_sessions: set[int]
) -> QuestionResult:
    return QuestionResult(
        question_id=question_id,
        category=category,
        ranked_sessions=tuple(ranked_sessions),
        gold_sessions=frozenset(gold_sessions),
    )


def test_score_question_names_and_values() -> None:
    result = QuestionResult(
        question_id="q",
        category="1",
        ranked_sessions=(3, 1, 2),
        gold_sessions=frozenset({1, 2}),
        ranked_turns=("D3:1", "D1:4", "D1:5", "D2:2"),
        gold_turns=frozenset({"D1:5", "D2:2"}),
    )
    scores = score_question(result, ks=(1, 3))
    assert scores["session.all@1"] == 0.0
    assert scores["session.any@3"] == 1.0
    assert scores["session.all@3"] == 1.0
    assert scores["session.precision@3"] == pytest.approx(2 / 3)
    assert scores["session.mrr"] == 0.5
    assert scores["turn.all@3"] == 0.0
    assert scores["turn.recall@3"] == 0.5
    assert scores["turn.mrr"] == pytest.approx(1 / 3)
    assert set(scores) == {
        f"{level}.{metric}@{k}"
        for level in ("session", "turn")
        for metric in ("all", "any", "recall", "precision", "ndcg")
        for k in (1, 3)
    } | {"session.mrr", "turn.mrr"}


def test_score_question_without_gold_turns_has_no_turn_metrics() -> None:
    scores = score_question(_result("q", "1", [1], {1}), ks=(1,))
    assert not any(name.startswith("turn.") for name in scores)


def test_summarise_gives_per_category_and_overall_means() -> None:
    results = [
        _result("a", "cat-1", [1, 2, 3], {1}),  # all@1 = 1
        _result("b", "cat-1", [2, 1, 3], {1}),  # all@1 = 0, all@3 = 1
        _result("c", "cat-2", [3, 2, 1], {1, 2}),  # all@1 = 0, all@3 = 1, any@1 = 0
    ]
    summary = summarise(results, ks=(1, 3))
    assert summary.overall.count == 3
    assert summary.overall.means["session.all@1"] == pytest.approx(1 / 3)
    assert summary.overall.means["session.all@3"] == 1.0
    assert summary.overall.counts["session.all@3"] == 3
    assert list(summary.by_category) == ["cat-1", "cat-2"]
    assert summary.by_category["cat-1"].count == 2
    assert summary.by_category["cat-1"].means["session.all@1"] == 0.5
    # MRR: a = 1, b = 1/2 -> 0.75; c = 1/2
    assert summary.by_category["cat-1"].means["session.mrr"] == 0.75
    assert summary.by_category["cat-2"].means["session.mrr"] == 0.5
    assert summary.overall.means["session.mrr"] == pytest.approx((1 + 0.5 + 0.5) / 3)


def test_summarise_of_nothing_is_empty() -> None:
    summary = summarise([])
    assert summary.overall.count == 0
    assert summary.by_category == {}


# --- baselines ---------------------------------------------------------------------------

TURNS = [
    ("D1:1", "Caroline: I adopted a puppy named Biscuit last week"),
    ("D1:2", "Melanie: The pottery class was relaxing"),
    ("D2:1", "Caroline: Biscuit chewed my running shoes"),
    ("D2:2", "Melanie: We went camping near the lake"),
]


def test_bm25_ranks_lexical_matches_first() -> None:
    bm25 = BM25Baseline(TURNS)
    assert len(bm25) == 4
    assert bm25.rank("pottery class", 1) == ["D1:2"]
    ranked = bm25.rank("What did Biscuit chew?", 4)
    assert ranked[0] == "D2:1"  # "biscuit" and nothing else matches better
    assert set(ranked[:2]) == {"D1:1", "D2:1"}
    assert sorted(ranked) == sorted(turn_id for turn_id, _ in TURNS)


def test_bm25_stopword_or_unseen_query_ranks_in_index_order() -> None:
    bm25 = BM25Baseline(TURNS)
    assert bm25.rank("the and of", 3) == ["D1:1", "D1:2", "D2:1"]
    assert bm25.rank("zeppelin", 2) == ["D1:1", "D1:2"]


def test_bm25_edge_cases() -> None:
    assert BM25Baseline([]).rank("anything", 5) == []
    with pytest.raises(ValueError, match="unique"):
        BM25Baseline([("a", "x"), ("a", "y")])


class _AxisEmbedder:
    """Maps each known keyword to an axis; texts embed to the normalised keyword counts."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.words = ["puppy", "pottery", "shoes", "camping"]

    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(len(texts))
        rows = np.array(
            [[text.lower().count(word) + 0.01 for word in self.words] for text in texts],
            dtype=np.float32,
        )
        normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return normalised


def test_dense_ranks_by_cosine_and_batches() -> None:
    embedder = _AxisEmbedder()
    dense = DenseBaseline(
        [*TURNS, ("D3:1", "Caroline: more puppy and shoes")], embedder, batch_size=2
    )
    assert embedder.calls == [2, 2, 1]
    assert dense.rank("camping", 1) == ["D2:2"]
    assert dense.rank("a puppy", 2) == ["D1:1", "D3:1"]
    scores = dense.scores("pottery")
    assert scores.shape == (5,)
    assert float(scores[1]) == pytest.approx(1.0, abs=1e-6)


def test_dense_rejects_a_wrong_shape() -> None:
    class Broken:
        def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            return np.ones((len(texts) + 1, 3), dtype=np.float32)

    with pytest.raises(ValueError, match="shape"):
        DenseBaseline(TURNS, Broken())


# --- tokens ------------------------------------------------------------------------------


def test_count_tokens_uses_cl100k() -> None:
    try:
        count = count_tokens("hello world")
    except ConfigurationError as error:
        pytest.skip(f"cl100k_base unavailable offline: {error.message}")
    assert count == 2  # cl100k_base: [15339, 1917]
    assert count_tokens("") == 0
    # special-token markup is counted as text, not refused
    assert count_tokens("<|endoftext|>") > 1
