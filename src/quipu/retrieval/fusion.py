"""Fusing the candidate lists of recall (RECALL-1): by score (the default) or by rank. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from quipu.core.query import Candidate

#: The RRF constant; 60 is the value of the original paper and of most hybrid engines.
RRF_K = 60
_SEMANTIC, _TEXT, _BOTH = ("semantic",), ("text",), ("semantic", "text")


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


def score_fusion(
    semantic: Sequence[Candidate],
    text: Sequence[Candidate],
    *,
    weight_vector: float,
    weight_text: float,
    boosts: Mapping[int, float] | None = None,
) -> list[tuple[int, float, tuple[str, ...]]]:
    """Fuse by score: ``weight_vector * cosine + weight_text * bm25 / top bm25 + boost``.

    The two scores carry what ranks throw away: how close the best vector match really is,
    and how far the other keyword matches trail the best one. BM25 has no fixed scale, so it
    is divided by the list's top score (the best keyword match scores 1). Cosine is kept as is.
    A candidate missing from the vector list gets the list's lowest cosine (every unlisted row
    scores at most that); one missing from the text list gets 0. ``boosts`` adds a bonus to
    the keys it names (a temporal match, say) and labels them ``"time"``; a boosted key that
    neither list holds is ignored. Ties break on key, so the order is deterministic.
    """
    top_text = max((c.score for c in text), default=0.0)
    floor = min((c.score for c in semantic), default=0.0)
    keyword = {c.key: c.score / top_text for c in text} if top_text > 0 else {}
    # One pass per list with the labels prebuilt: this runs twice per recall over ~200 keys.
    fused: dict[int, tuple[float, tuple[str, ...]]] = {}
    for key, cosine in {c.key: c.score for c in semantic}.items():
        share = keyword.get(key)
        if share is None:
            fused[key] = (weight_vector * cosine, _SEMANTIC)
        else:
            fused[key] = (weight_vector * cosine + weight_text * share, _BOTH)
    low = weight_vector * floor
    for c in text:
        if c.key not in fused:
            share = keyword.get(c.key)
            fused[c.key] = (low, ()) if share is None else (low + weight_text * share, _TEXT)
    if boosts:
        for key, bonus in boosts.items():
            entry = fused.get(key)
            if entry is not None and bonus:
                fused[key] = (entry[0] + bonus, (*entry[1], "time"))
    ordered = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(key, score, labels) for key, (score, labels) in ordered]


def session_aggregate(
    fused: Sequence[tuple[int, float, tuple[str, ...]]],
    sessions: Mapping[int, str],
    *,
    weight: float,
    tau: float = 0.05,
) -> list[tuple[int, float, tuple[str, ...]]]:
    """Raise each candidate by how many near-best candidates its session holds.

    For a session S with fused scores ``v`` in the pool, ``g_S = tau * log sum exp((v - max
    v) / tau)``: 0 when one candidate stands alone, about ``tau * log n`` when ``n`` are as good
    as its best. Every candidate of S gains ``weight * g_S``; candidates with no session gain
    nothing. A conversation that keeps coming back to the query's topic is more likely to hold
    all its evidence (measured in docs/benchmarks.md). Ties break on key.
    """
    members: dict[str, list[float]] = {}
    for key, score, _ in fused:
        session = sessions.get(key)
        if session is not None:
            members.setdefault(session, []).append(score)
    gain = {session: session_gain(values, tau) for session, values in members.items()}
    scored = [
        (key, score + weight * gain.get(sessions.get(key, ""), 0.0), found)
        for key, score, found in fused
    ]
    return sorted(scored, key=lambda item: (-item[1], item[0]))


def session_gain(scores: Sequence[float], tau: float = 0.05) -> float:
    """A soft count of a session's near-best candidates: ``tau * log sum exp((v - best) / tau)``
    over its candidates' scores (0 for a lone candidate; the retrieval lab scores with it too)."""
    best = max(scores)
    return tau * math.log(sum(math.exp((v - best) / tau) for v in scores))
