"""Reciprocal rank fusion (RECALL-1). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from quipu.core.query import Candidate

#: The RRF constant; 60 is the value of the original paper and of most hybrid engines.
RRF_K = 60


def rrf(
    lists: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float] | None = None,
    k: int = RRF_K,
) -> list[tuple[int, float, tuple[str, ...]]]:
    """Fuse ranked candidate lists into (key, score, retrievers that found it), best first.

    Each list contributes ``weight / (k + rank)`` for rank 1, 2, ...; ties break on key so the
    order is deterministic.
    """
    scores: dict[int, float] = {}
    found: dict[int, list[str]] = {}
    for name, candidates in lists.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, cand in enumerate(candidates, start=1):
            scores[cand.key] = scores.get(cand.key, 0.0) + weight / (k + rank)
            found.setdefault(cand.key, []).append(name)
    ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(key, score, tuple(found[key])) for key, score in ordered]
