"""Retrieval metrics for the benchmark harnesses. Pure functions over ranked ids.

Conventions, shared by every metric here:

* ``ranked`` is a best-first list of ids; ``gold`` the set of relevant ids.
* Only the first occurrence of an id counts: a repeat earns nothing (so a ranker cannot
  score twice with one relevant id).
* ``k`` is a cut-off on the ranked list and must be at least 1. A list shorter than ``k``
  is scored as it is (precision still divides by ``k``).
* ``gold`` must not be empty: a question with nothing to find is not scoreable, and the
  harness must leave it out (LoCoMo category 5, LongMemEval ``_abs`` questions); the
  metrics raise ``ValueError`` rather than invent a score.

Session-level scoring follows the benchmark protocol: rank turns, map each turn to its
session and keep each session's first occurrence (:func:`sessions_from_ranked_turns`), then
score that list of distinct sessions.

nDCG uses **binary gains** (1 for a gold id, 0 otherwise; the benchmarks label evidence, not
grades) and the standard discount ``1 / log2(rank + 1)``; the ideal ranking puts
``min(k, len(gold))`` gold ids first.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = [
    "DEFAULT_KS",
    "LEVELS",
    "GroupSummary",
    "QuestionResult",
    "Summary",
    "mrr",
    "ndcg_at_k",
    "percentile",
    "precision_at_k",
    "recall_all_at_k",
    "recall_any_at_k",
    "recall_at_k",
    "score_question",
    "sessions_from_ranked_turns",
    "summarise",
]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)
LEVELS: tuple[str, ...] = ("session", "turn")

T = TypeVar("T", bound=Hashable)
S = TypeVar("S", bound=Hashable)


def sessions_from_ranked_turns(
    ranked_turn_ids: Iterable[str], turn_to_session: Mapping[str, S]
) -> list[S]:
    """The distinct sessions of a turn ranking, in order of first occurrence.

    Raises ``ValueError`` for a turn id the mapping does not know: a ranker that returns
    ids outside the corpus is a bug, not a miss.
    """
    sessions: list[S] = []
    seen: set[S] = set()
    for turn_id in ranked_turn_ids:
        try:
            session = turn_to_session[turn_id]
        except KeyError:
            raise ValueError(f"ranked turn {turn_id!r} has no session") from None
        if session not in seen:
            seen.add(session)
            sessions.append(session)
    return sessions


def _top_k(ranked: Sequence[T], gold: Collection[T], k: int) -> set[T]:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not gold:
        raise ValueError("gold is empty: the question is not scoreable")
    return set(ranked[:k])


def recall_all_at_k(ranked: Sequence[T], gold: Collection[T], k: int) -> float:
    """1.0 when every gold id is among the first ``k``, else 0.0."""
    top = _top_k(ranked, gold, k)
    return 1.0 if all(item in top for item in gold) else 0.0


def recall_any_at_k(ranked: Sequence[T], gold: Collection[T], k: int) -> float:
    """1.0 when at least one gold id is among the first ``k``, else 0.0."""
    top = _top_k(ranked, gold, k)
    return 1.0 if any(item in top for item in gold) else 0.0


def recall_at_k(ranked: Sequence[T], gold: Collection[T], k: int) -> float:
    """Fraction of the (distinct) gold ids found among the first ``k``."""
    top = _top_k(ranked, gold, k)
    wanted = set(gold)
    return len(top & wanted) / len(wanted)


def precision_at_k(ranked: Sequence[T], gold: Collection[T], k: int) -> float:
    """Distinct gold ids among the first ``k``, divided by ``k``."""
    top = _top_k(ranked, gold, k)
    return len(top & set(gold)) / k


def ndcg_at_k(ranked: Sequence[T], gold: Collection[T], k: int) -> float:
    """Normalised DCG at ``k`` with binary gains and discount ``1 / log2(rank + 1)``."""
    _top_k(ranked, gold, k)
    wanted = set(gold)
    seen: set[T] = set()
    dcg = 0.0
    for rank, item in enumerate(ranked[:k], start=1):
        if item in wanted and item not in seen:
            dcg += 1.0 / math.log2(rank + 1)
        seen.add(item)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(wanted)) + 1))
    return dcg / ideal


def mrr(ranked: Sequence[T], gold: Collection[T]) -> float:
    """Reciprocal rank of the first gold id (0.0 if none); its mean over questions is MRR."""
    if not gold:
        raise ValueError("gold is empty: the question is not scoreable")
    wanted = set(gold)
    for rank, item in enumerate(ranked, start=1):
        if item in wanted:
            return 1.0 / rank
    return 0.0


def percentile(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (0-100), interpolating linearly between closest ranks.

    The same definition as numpy's default (``method="linear"``): with ``n`` sorted values
    the percentile sits at position ``(n - 1) * p / 100``.
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"p must be within 0..100, got {p}")
    position = (len(ordered) - 1) * p / 100.0
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction


# --------------------------------------------------------------------------------------
# Per-question scoring and aggregation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionResult:
    """One question's ranking and gold labels, at turn and session level.

    ``ranked_sessions`` is normally ``sessions_from_ranked_turns(ranked_turns, ...)``.
    Turn-level metrics are computed only when ``gold_turns`` is not empty.
    """

    question_id: str
    category: str
    """The group the question is averaged in: LoCoMo category, LongMemEval question type."""
    ranked_sessions: tuple[Hashable, ...]
    gold_sessions: frozenset[Hashable]
    ranked_turns: tuple[str, ...] = ()
    gold_turns: frozenset[str] = field(default_factory=frozenset)


def score_question(result: QuestionResult, ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """Every metric for one question, named ``"<level>.<metric>@<k>"`` or ``"<level>.mrr"``.

    Metrics: ``all``, ``any``, ``recall``, ``precision``, ``ndcg`` at each ``k``, and ``mrr``;
    levels ``session`` and (when the question has gold turns) ``turn``.
    """
    scores: dict[str, float] = {}
    levels: list[tuple[str, Sequence[Hashable], Collection[Hashable]]] = [
        ("session", result.ranked_sessions, result.gold_sessions)
    ]
    if result.gold_turns:
        levels.append(("turn", result.ranked_turns, result.gold_turns))
    for level, ranked, gold in levels:
        for k in ks:
            scores[f"{level}.all@{k}"] = recall_all_at_k(ranked, gold, k)
            scores[f"{level}.any@{k}"] = recall_any_at_k(ranked, gold, k)
            scores[f"{level}.recall@{k}"] = recall_at_k(ranked, gold, k)
            scores[f"{level}.precision@{k}"] = precision_at_k(ranked, gold, k)
            scores[f"{level}.ndcg@{k}"] = ndcg_at_k(ranked, gold, k)
        scores[f"{level}.mrr"] = mrr(ranked, gold)
    return scores


@dataclass(frozen=True)
class GroupSummary:
    count: int
    """Questions in the group."""
    means: Mapping[str, float]
    """Metric name -> mean over the group's questions that have that metric."""
    counts: Mapping[str, int]
    """Metric name -> how many questions the mean is over (turn metrics may be fewer)."""


@dataclass(frozen=True)
class Summary:
    overall: GroupSummary
    by_category: Mapping[str, GroupSummary]
    """Sorted by category name."""


def _group(scored: Sequence[Mapping[str, float]]) -> GroupSummary:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for scores in scored:
        for name, value in scores.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1
    return GroupSummary(
        count=len(scored),
        means={name: sums[name] / counts[name] for name in sums},
        counts=counts,
    )


def summarise(results: Iterable[QuestionResult], ks: Sequence[int] = DEFAULT_KS) -> Summary:
    """Means of :func:`score_question` overall and per category (micro averages)."""
    everything: list[dict[str, float]] = []
    by_category: dict[str, list[dict[str, float]]] = {}
    for result in results:
        scores = score_question(result, ks)
        everything.append(scores)
        by_category.setdefault(result.category, []).append(scores)
    return Summary(
        overall=_group(everything),
        by_category={name: _group(by_category[name]) for name in sorted(by_category)},
    )
