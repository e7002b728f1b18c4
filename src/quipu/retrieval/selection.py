"""What a merged recall chooses and how much of it fits (RECALL-9). Pure: no I/O.

- :func:`diversify` — the knowledge half's selection from an over-fetched pool: drop what this
  session was already shown, exact duplicates, and near duplicates of a selected row, choosing
  by MMR; every drop is refilled from the pool, and a row already shown comes back before a slot
  would stay empty; a row without a vector is never dropped as similar.
- :func:`fit_budget` — rows in their final order, cut to a token budget.
- :func:`answer_confidence` — whether the best row stands out from the rest of this query's rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from quipu.retrieval.vectors import Vector

#: MMR's weight on relevance against novelty (RECALL-9).
LAMBDA = 0.7
#: Cosine to an already selected row at which a candidate is the same fact twice.
NEAR_DUPLICATE = 0.95
#: How many candidates per wanted row the knowledge half fetches, and the pool's ceiling.
OVER_FETCH = 3
MAX_POOL = 60

R = TypeVar("R", bound=Mapping[str, Any])


@dataclass(frozen=True)
class Knobs:
    """Diversity settings of one call (each overridable within bounds)."""

    enabled: bool = True
    lam: float = LAMBDA
    near_duplicate: float = NEAR_DUPLICATE
    over_fetch: int = OVER_FETCH
    max_pool: int = MAX_POOL

    def pool_size(self, limit: int) -> int:
        return max(limit, min(self.max_pool, limit * self.over_fetch))


@dataclass(frozen=True)
class Pooled:
    """A candidate of the knowledge half, in ranked order: its id, score, exact-duplicate key
    (empty: none) and vector (None: not loadable)."""

    id: str
    score: float
    fingerprint: str
    vector: Vector | None


def diversify(
    pool: Sequence[Pooled], limit: int, seen: frozenset[str], knobs: Knobs
) -> tuple[list[str], dict[str, Any]]:
    """The ids chosen from ``pool`` (best first) and ``meta.diversity``'s counts."""
    counts: dict[str, Any] = {
        "candidates": len(pool),
        "selected": 0,
        "dropped_already_seen": 0,
        "readmitted_already_seen": 0,
        "dropped_exact_duplicates": 0,
        "dropped_near_duplicates": 0,
        "vectors_available": sum(p.vector is not None for p in pool),
        "lambda": knobs.lam,
        "near_dup_threshold": knobs.near_duplicate,
        "over_fetch": knobs.over_fetch,
        "enabled": knobs.enabled,
    }
    if not knobs.enabled:
        chosen = [p.id for p in pool[:limit]]
        counts["selected"] = len(chosen)
        return chosen, counts
    fresh = [p for p in pool if p.id not in seen]
    repeats = [p for p in pool if p.id in seen]
    counts["dropped_already_seen"] = len(repeats)
    prints: set[str] = set()
    unique: list[Pooled] = []
    for p in fresh:
        if p.fingerprint and p.fingerprint in prints:
            counts["dropped_exact_duplicates"] += 1
            continue
        prints.add(p.fingerprint)
        unique.append(p)
    top = max((p.score for p in pool), default=0.0)
    scale = top if top > 0 else 1.0
    selected: list[Pooled] = []
    remaining = list(unique)
    while remaining and len(selected) < limit:
        best_at, best_value, best_sim = 0, -math.inf, 0.0
        for at, p in enumerate(remaining):
            sim = _max_similarity(p, selected)
            value = knobs.lam * (p.score / scale) - (1.0 - knobs.lam) * sim
            if value > best_value:
                best_at, best_value, best_sim = at, value, sim
        picked = remaining.pop(best_at)
        if best_sim >= knobs.near_duplicate:
            counts["dropped_near_duplicates"] += 1
            continue
        selected.append(picked)
    for p in repeats:  # the floor: a repeat rather than a hole
        if len(selected) >= limit:
            break
        if p.fingerprint and p.fingerprint in {s.fingerprint for s in selected}:
            continue
        selected.append(p)
        counts["readmitted_already_seen"] += 1
    counts["dropped_already_seen"] -= counts["readmitted_already_seen"]
    order = {p.id: at for at, p in enumerate(pool)}
    chosen = sorted((p.id for p in selected), key=order.__getitem__)
    counts["selected"] = len(chosen)
    return chosen, counts


def _max_similarity(p: Pooled, selected: Sequence[Pooled]) -> float:
    """The largest cosine of ``p`` to a selected row; 0 when either has no vector (an
    unmeasurable row is not similar)."""
    if p.vector is None:
        return 0.0
    best = 0.0
    for s in selected:
        if s.vector is not None and s.vector.shape == p.vector.shape:
            best = max(best, float(np.dot(p.vector, s.vector)))
    return best


def tokens_estimate(text: str) -> int:
    """A token estimate: UTF-8 bytes / 4, rounded up (cl100k averages about 4 bytes a token
    on English prose; an estimate, never a tokenizer count)."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


def fit_budget(rows: Sequence[R], budget: int | None) -> tuple[list[R], list[R]]:
    """(kept, cut): rows taken in order while their ``tokens_estimate`` fits ``budget``; a row
    that does not fit is cut and the next, smaller one may still fit."""
    if budget is None:
        return list(rows), []
    kept: list[R] = []
    cut: list[R] = []
    used = 0
    for row in rows:
        cost = int(row["tokens_estimate"])
        if used + cost <= budget:
            kept.append(row)
            used += cost
        else:
            cut.append(row)
    return kept, cut


#: Separation (in standard deviations of the other rows' scores) from which the best row is
#: an answer, and from which it is at least weak evidence. ``answer``: calibrated with `quipu
#: bench knowledge` on LoCoMo conversations 1-3 (383 questions; an answer = the best knowledge
#: row is an evidence session, base rate 0.193): 10.45 had the best accuracy (0.815). ``weak``:
#: `python -m quipu.evals.answer_confidence` (all 10 conversations, 1,536 questions, leaving one
#: conversation out at a time): the cut that best separates answered from unanswered questions
#: (Youden's J) was 3.02-3.45 in every fold and 3.02 on all; from 2.0 to 3.02, ``weak`` rows
#: went from 27% evidence to 36% and ``none`` from 8% to 13% (docs/knowledge.md). The accuracy-
#: best ``answer`` cut moved between folds (5.9-10.45) and gained no accuracy held out, so it
#: stays.
ANSWER_SEPARATION = 10.45
WEAK_SEPARATION = 3.02


def answer_confidence(scores: Sequence[float]) -> tuple[str, float | None]:
    """(``answer`` | ``weak`` | ``none``, the separation): how far the best score stands above
    the others of this query, in their standard deviations — a property of this query's own
    ranking, not a fixed score floor, so it survives a change of model, fusion or corpus."""
    ranked = sorted(scores, reverse=True)
    if not ranked:
        return "none", None
    if len(ranked) == 1:
        return "weak", None
    rest = np.asarray(ranked[1:], dtype=np.float64)
    spread = float(rest.std()) if rest.size > 1 else 0.0
    gap = ranked[0] - float(rest.mean())
    separation = gap / max(spread, 0.05 * max(abs(ranked[0]), 1e-9), 1e-6)
    if separation >= ANSWER_SEPARATION:
        return "answer", round(separation, 4)
    if separation >= WEAK_SEPARATION:
        return "weak", round(separation, 4)
    return "none", round(separation, 4)
