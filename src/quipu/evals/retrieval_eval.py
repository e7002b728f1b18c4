"""The synthetic retrieval eval: scorer and runner (EVAL-2 over the EVAL-1 corpus).

It measures and never gates: nothing in recall reads these numbers.

The runner (:func:`run_retrieval_eval`)
    1. Loads ``corpus.json`` and ``queries.json``, never ``qrels.json``.
    2. Writes every conversation into one fresh SQLite file through the public library API:
       ``quipu.open(db, local_agent_id=<conversation id>)``, so each conversation is its own
       ``agent`` scope, with the settings ``quipu serve`` ships with (only the embedded job
       worker is off: nothing here queues work). One ``remember`` per turn, as an agent would
       write: the text ``"<speaker>: <text>"``, ``observed_at`` *and* ``valid_at`` = the
       turn's time, ``session_id`` = the session, the turn id in ``metadata``. ``valid_at``
       matters: ``as_of`` reads what was valid at an instant, and a turn became true when it
       was said, not when the eval ran.
    3. Searches. The function that runs a query is handed a :class:`SealedQuery` (query id,
       text, ``as_of``) and nothing else, and returns turn ids best first: the memories
       ``recall`` returns mapped back to the turns that wrote them (a repeated text maps to
       every turn that wrote it). Queries go to their conversation's scope: whose memory to
       search, not what is relevant.
    4. Only then loads the sealed ``qrels.json`` and scores the rankings.

Metrics, per query on the first ``k`` results, then means per tier, per variant and overall
    * relevant = every judged turn (grade 1-3). **P@k**, **R@k** and **MRR** use binary
      relevance, computed by :mod:`quipu.evals.metrics`; MRR is over the ``k`` results a
      recall returns (0 when none is relevant). P@k is bounded by the one to two relevant
      turns a query has: 1.0 is out of reach for ``k`` > 2.
    * **nDCG@k** is graded: gain ``2**grade - 1``, discount ``1 / log2(rank + 1)``, the ideal
      ranking puts the judged grades in descending order.
    * **top-1**: the first result is an answer turn (the query's highest grade).
    * **violation rate**: for queries with ``must_not_rank_above`` turns (supersession,
      contradiction, stale, injection), the share where such a turn is among the first ``k``
      and above every answer turn (an answer missing from the first ``k`` is below it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from quipu.embedded import Quipu
from quipu.embeddings.base import Embedder
from quipu.evals.datasets import DatasetFormatError
from quipu.evals.ingest import IngestStats, ranking_settings, remember_turn
from quipu.evals.metrics import mrr, precision_at_k, recall_at_k
from quipu.evals.public_bench import Progress
from quipu.evals.synthetic import (
    TIERS,
    ChatConversation,
    EvalQuery,
    Judgement,
    corpus_seed,
    load_conversations,
    load_qrels,
    load_queries,
)

__all__ = [
    "DEFAULT_K",
    "IngestStats",
    "QueryScore",
    "RetrievalReport",
    "SealedQuery",
    "TierScore",
    "graded_ndcg_at_k",
    "run_retrieval_eval",
    "score_query",
    "score_rankings",
    "violates_order",
]

DEFAULT_K = 5
#: The scope every conversation is written to; each conversation has its own agent id.
SCOPE = "agent"


@dataclass(frozen=True)
class SealedQuery:
    """All the search path may see of a query."""

    query_id: str
    text: str
    as_of: datetime | None = None


Search = Callable[[SealedQuery], list[str]]


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------


def _gain(grade: int) -> float:
    return float(2**grade - 1)


def graded_ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """nDCG at ``k`` with graded gains ``2**grade - 1`` and discount ``1 / log2(rank + 1)``.

    Only an id's first occurrence earns its gain. Raises ``ValueError`` for ``k`` below 1 or
    when no id has a positive grade (nothing to find is not scoreable).
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    ideal_grades = sorted((g for g in grades.values() if g > 0), reverse=True)
    if not ideal_grades:
        raise ValueError("no relevant id: the query is not scoreable")
    seen: set[str] = set()
    dcg = 0.0
    for rank, item in enumerate(ranked[:k], start=1):
        if item not in seen:
            dcg += _gain(grades.get(item, 0)) / math.log2(rank + 1)
        seen.add(item)
    ideal = sum(
        _gain(grade) / math.log2(rank + 1) for rank, grade in enumerate(ideal_grades[:k], start=1)
    )
    return dcg / ideal


def violates_order(
    ranked: Sequence[str], answers: Collection[str], forbidden: Collection[str], k: int
) -> bool:
    """True when a ``forbidden`` id is among the first ``k`` with no answer id before it."""
    for item in ranked[:k]:
        if item in answers:
            return False
        if item in forbidden:
            return True
    return False


@dataclass(frozen=True)
class QueryScore:
    query_id: str
    tier: str
    variant: str
    precision: float
    recall: float
    reciprocal_rank: float
    ndcg: float
    top1: float
    violation: bool | None
    """None when the query has no ``must_not_rank_above`` turns."""
    ranked: tuple[str, ...]
    """The first ``k`` turn ids, as returned."""


def score_query(ranked: Sequence[str], judgement: Judgement, k: int) -> QueryScore:
    """Every metric of one query on the first ``k`` of ``ranked``."""
    top = list(ranked[:k])
    grades = judgement.relevant
    relevant = [turn for turn, grade in grades.items() if grade > 0]
    best = max(grades.values(), default=0)
    answers = [turn for turn, grade in grades.items() if grade == best]
    forbidden = judgement.must_not_rank_above
    return QueryScore(
        query_id=judgement.query_id,
        tier=judgement.tier,
        variant=judgement.variant,
        precision=precision_at_k(top, relevant, k),
        recall=recall_at_k(top, relevant, k),
        reciprocal_rank=mrr(top, relevant),
        ndcg=graded_ndcg_at_k(top, grades, k),
        top1=1.0 if top and top[0] in answers else 0.0,
        violation=violates_order(top, answers, forbidden, k) if forbidden else None,
        ranked=tuple(top),
    )


@dataclass(frozen=True)
class TierScore:
    """Means over a group of queries."""

    count: int
    precision: float
    recall: float
    mrr: float
    ndcg: float
    top1: float
    violation_rate: float | None
    """Over the group's queries with ``must_not_rank_above`` turns; None when it has none."""
    violation_queries: int
    """How many queries the violation rate is over."""


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def _summarise(scores: Sequence[QueryScore]) -> TierScore:
    checked = [s.violation for s in scores if s.violation is not None]
    return TierScore(
        count=len(scores),
        precision=_mean(s.precision for s in scores),
        recall=_mean(s.recall for s in scores),
        mrr=_mean(s.reciprocal_rank for s in scores),
        ndcg=_mean(s.ndcg for s in scores),
        top1=_mean(s.top1 for s in scores),
        violation_rate=_mean(float(v) for v in checked) if checked else None,
        violation_queries=len(checked),
    )


def score_rankings(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Judgement], k: int
) -> tuple[TierScore, dict[str, TierScore], dict[str, TierScore], list[QueryScore]]:
    """Overall, per-tier (in :data:`TIERS` order) and per-variant (``"<tier>/<variant>"``)
    means, and every query's score. Every judged query must have a ranking and every
    ranking a judgement: a mismatch is a bug in the run, not a miss."""
    if set(rankings) != set(qrels):
        missing = sorted(set(qrels) - set(rankings))[:5]
        unjudged = sorted(set(rankings) - set(qrels))[:5]
        raise ValueError(f"rankings and qrels differ: unranked {missing}, unjudged {unjudged}")
    scores = [score_query(rankings[query_id], qrels[query_id], k) for query_id in sorted(qrels)]
    tiers = {
        tier: _summarise([s for s in scores if s.tier == tier])
        for tier in TIERS
        if any(s.tier == tier for s in scores)
    }
    variant_names = sorted({f"{s.tier}/{s.variant}" for s in scores if s.variant})
    variants = {
        name: _summarise([s for s in scores if f"{s.tier}/{s.variant}" == name])
        for name in variant_names
    }
    return _summarise(scores), tiers, variants, scores


# --------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalReport:
    k: int
    seed: int
    conversations: int
    turns: int
    queries: int
    embedder: str
    settings: Mapping[str, Any]
    ingest: IngestStats
    ingest_seconds: float
    search_seconds: float
    overall: TierScore
    tiers: Mapping[str, TierScore]
    variants: Mapping[str, TierScore]
    per_query: tuple[QueryScore, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, floats rounded to four places; ``per_query`` only when collected."""
        data: dict[str, Any] = _rounded(asdict(self))
        if not self.per_query:
            del data["per_query"]
        return data


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value


class _Silent:
    def start(self, stage: str, total: int) -> None:
        return None

    def advance(self, stage: str, amount: int) -> None:
        return None


def _ingest(mem: Quipu, conversation: ChatConversation, stats: IngestStats) -> dict[str, list[str]]:
    """Write every turn with ``remember``; returns memory id -> the turn ids that wrote it."""
    turns_of: dict[str, list[str]] = {}
    for session, turn in conversation.turns():
        remember_turn(
            mem,
            stats,
            turns_of,
            turn.turn_id,
            turn.indexed_text,
            scope=SCOPE,
            observed_at=turn.observed_at,
            valid_at=turn.observed_at,
            session_id=session.session_id,
            metadata={"turn_id": turn.turn_id, "session": session.session_id},
        )
    return turns_of


def _searcher(mem: Quipu, turns_of: Mapping[str, list[str]], k: int) -> Search:
    """The sealed search path of one conversation: a query in, turn ids out."""

    def search(query: SealedQuery) -> list[str]:
        result = mem.recall(query.text, scope=SCOPE, k=k, as_of=query.as_of)
        ranked: list[str] = []
        for hit in result.results:
            ranked.extend(turns_of.get(hit.memory.id, ()))
        return ranked[:k]

    return search


def _queries_by_conversation(
    queries: Sequence[EvalQuery], conversations: Sequence[ChatConversation]
) -> dict[str, list[EvalQuery]]:
    known = {c.conversation_id for c in conversations}
    grouped: dict[str, list[EvalQuery]] = {}
    for query in queries:
        if query.conversation_id not in known:
            raise DatasetFormatError(
                f"query {query.query_id} names unknown conversation {query.conversation_id}"
            )
        grouped.setdefault(query.conversation_id, []).append(query)
    return grouped


def run_retrieval_eval(
    data: str | Path,
    db: str | Path,
    *,
    k: int = DEFAULT_K,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    details: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> RetrievalReport:
    """Ingest the corpus in ``data`` into a fresh store at ``db``, run every query, and
    score the rankings against the sealed judgements (read last). ``embedder`` defaults to
    the bundled local model; ``details`` keeps every query's score and top ``k``;
    ``overrides`` change settings (``quipu eval retrieval --set``), default: none."""
    import quipu

    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    path = Path(db)
    if path.exists():
        raise FileExistsError(f"{path} exists: the eval writes into a fresh store")
    conversations = load_conversations(data)
    queries = load_queries(data)
    grouped = _queries_by_conversation(queries, conversations)
    if embedder is None:
        from quipu.embeddings.local import LocalEmbedder

        embedder = LocalEmbedder()
    progress = progress or _Silent()
    progress.start("ingest", sum(len(c.turns()) for c in conversations))
    progress.start("recall", len(queries))

    stats = IngestStats()
    rankings: dict[str, list[str]] = {}
    settings: dict[str, Any] = {}
    ingest_s = search_s = 0.0
    for conversation in conversations:
        opened = quipu.open(
            path,
            embedder=embedder,
            local_agent_id=conversation.conversation_id,
            worker_embedded=False,
            **(overrides or {}),
        )
        with opened as mem:
            settings = settings or ranking_settings(mem.service.limits)
            started = time.perf_counter()
            turns_of = _ingest(mem, conversation, stats)
            ingest_s += time.perf_counter() - started
            progress.advance("ingest", len(conversation.turns()))
            search = _searcher(mem, turns_of, k)
            started = time.perf_counter()
            for query in grouped.get(conversation.conversation_id, []):
                rankings[query.query_id] = search(
                    SealedQuery(query.query_id, query.text, query.as_of)
                )
                progress.advance("recall", 1)
            search_s += time.perf_counter() - started

    qrels = load_qrels(data)  # sealed until every search has run
    overall, tiers, variants, scores = score_rankings(rankings, qrels, k)
    return RetrievalReport(
        k=k,
        seed=corpus_seed(data),
        conversations=len(conversations),
        turns=stats.turns,
        queries=len(queries),
        embedder=embedder.model_id,
        settings=settings,
        ingest=stats,
        ingest_seconds=ingest_s,
        search_seconds=search_s,
        overall=overall,
        tiers=tiers,
        variants=variants,
        per_query=tuple(scores) if details else (),
    )
