"""Harnesses for the public conversational-memory benchmarks, LoCoMo and LongMemEval (EVAL-3).

Each benchmark file becomes a list of :class:`Haystack` objects: the turns one agent would
have been told, and the questions asked of them. LoCoMo gives one haystack per conversation
(all its scored questions); LongMemEval one per question (its own ~50-session haystack).

A :class:`System` indexes a haystack and ranks its turns for a question. Three are measured
side by side on the same data with the same metrics:

* ``quipu``: a fresh store per haystack, opened through the public library API with the
  settings ``quipu serve`` ships with (plus any explicit overrides). Every turn is written
  with ``remember`` as an agent would: its text, ``observed_at`` = the session's date,
  ``session_id`` = the session, and the turn id in ``metadata``. Questions go through
  ``recall``. A store's deduplication returns the existing memory for a repeated text; the
  harness then maps that memory to every turn id that wrote it.
* ``bm25``: :class:`~quipu.evals.baselines.BM25Baseline` (bm25s) over the same turns.
* ``dense``: :class:`~quipu.evals.baselines.DenseBaseline`, exact cosine kNN with the same
  embedder instance Quipu uses.
* ``hybrid``: :class:`~quipu.evals.baselines.HybridBaseline`, the plain hybrid: reciprocal-rank
  fusion (k = 60, equal weights) of those two rankings.

Scoring follows ``../shared/data/README.md``: rank turns, map each to its session, keep each
session's first occurrence, then ``all@k`` (every gold session among the first k distinct
sessions) and ``any@k``; the same at turn level over the ranked turns; nDCG@10 (binary gains);
and the cl100k tokens the first k ranked turns would paste into a prompt.

LoCoMo turns are indexed as ``"<speaker>: <text>"`` (plus the image caption), every speaker,
scored questions are categories 1-4 with evidence. LongMemEval follows its official retrieval
protocol: user turns only, ``_abs`` questions and questions whose answer sessions hold no user
turn with ``has_answer`` are skipped (:meth:`LMEQuestion.is_scored`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from quipu.embeddings.base import Embedder
from quipu.evals.baselines import BM25Baseline, DenseBaseline, HybridBaseline
from quipu.evals.datasets import load_locomo, load_longmemeval
from quipu.evals.ingest import IngestStats, ranking_settings, remember_turn
from quipu.evals.metrics import (
    DEFAULT_KS,
    QuestionResult,
    percentile,
    score_question,
    sessions_from_ranked_turns,
)
from quipu.evals.tokens import count_tokens

__all__ = [
    "LOCOMO_CATEGORIES",
    "Haystack",
    "Progress",
    "Query",
    "Ranker",
    "System",
    "Systems",
    "Turn",
    "locomo_haystacks",
    "longmemeval_haystacks",
    "make_systems",
    "run_benchmark",
]

#: LoCoMo's question categories (5, adversarial, has no evidence and is not scored).
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

#: The scope every haystack is written to; each haystack has its own store and agent id.
SCOPE = "agent"


@dataclass(frozen=True)
class Turn:
    turn_id: str
    session: str
    text: str
    """What gets indexed."""
    observed_at: datetime
    """The session's date."""


@dataclass(frozen=True)
class Query:
    question_id: str
    category: str
    """The group it is averaged in: LoCoMo category, LongMemEval question type."""
    text: str
    gold_sessions: frozenset[str]
    gold_turns: frozenset[str]
    asked_at: datetime | None = None


@dataclass(frozen=True)
class Haystack:
    haystack_id: str
    """LoCoMo ``sample_id`` or LongMemEval ``question_id``; also the store's agent id."""
    turns: tuple[Turn, ...]
    queries: tuple[Query, ...]

    def turn_to_session(self) -> dict[str, str]:
        return {turn.turn_id: turn.session for turn in self.turns}


def _locomo_session(number: int) -> str:
    return f"session_{number}"


def locomo_haystacks(path: str | Path, limit: int | None = None) -> list[Haystack]:
    """One haystack per conversation holding its scored questions; the first ``limit``
    scored questions in file order when ``limit`` is given (empty haystacks dropped)."""
    haystacks: list[Haystack] = []
    left = limit
    for conversation in load_locomo(path):
        scored = conversation.scored_questions()
        if left is not None:
            scored = scored[:left]
            left -= len(scored)
        if not scored:
            continue
        turns = tuple(
            Turn(turn.turn_id, _locomo_session(turn.session), turn.text, turn.observed_at)
            for turn in conversation.turns
        )
        queries = tuple(
            Query(
                question_id=question.question_id,
                category=f"{question.category} {LOCOMO_CATEGORIES.get(question.category, '')}",
                text=question.question,
                gold_sessions=frozenset(_locomo_session(s) for s in question.evidence_sessions),
                gold_turns=frozenset(question.evidence),
            )
            for question in scored
        )
        haystacks.append(Haystack(conversation.sample_id, turns, queries))
    return haystacks


def longmemeval_haystacks(path: str | Path, limit: int | None = None) -> list[Haystack]:
    """One haystack (the user turns of its sessions) per scored question, file order."""
    haystacks: list[Haystack] = []
    for question in load_longmemeval(path):
        if limit is not None and len(haystacks) >= limit:
            break
        if not question.is_scored():
            continue
        dates = {session.session_id: session.observed_at for session in question.sessions}
        turns = tuple(
            Turn(turn.turn_id, turn.session_id, turn.content, dates[turn.session_id])
            for turn in question.indexed_turns()
        )
        query = Query(
            question_id=question.question_id,
            category=question.question_type,
            text=question.question,
            gold_sessions=question.gold_sessions(),
            gold_turns=question.gold_turns(),
            asked_at=question.question_date,
        )
        haystacks.append(Haystack(question.question_id, turns, (query,)))
    return haystacks


# --------------------------------------------------------------------------------------
# Systems
# --------------------------------------------------------------------------------------


class Ranker(Protocol):
    def rank(self, query: Query, n: int) -> list[str]:
        """Ids of the best ``n`` turns for ``query``, best first."""
        ...

    def close(self) -> None: ...


class System(Protocol):
    name: str

    def index(self, haystack: Haystack, advance: Callable[[int], None]) -> Ranker:
        """Index every turn of ``haystack``; call ``advance(turns)`` as turns are indexed."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the report says about this system (settings, indexing counts)."""
        ...


class _SharedTurnVectors(Embedder):
    """The embedder of Quipu's stores, keeping the vectors of the turns a store wrote while
    ``recording``, so the dense baseline indexes those very vectors instead of embedding the
    haystack a second time (same model, same text). Queries are not recorded."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.recording = False
        self.turns: dict[str, npt.NDArray[np.float32]] = {}

    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = self.inner.embed_batch(texts)
        if self.recording:
            self.turns.update(zip(texts, vectors, strict=True))
        return vectors


class _RecordedFirst:
    """The dense baseline's embedder: a batch of recorded turn texts is served from the
    record, anything else (every query) goes to the model."""

    def __init__(self, shared: _SharedTurnVectors) -> None:
        self._shared = shared

    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        recorded = self._shared.turns
        if texts and all(text in recorded for text in texts):
            return np.stack([recorded[text] for text in texts])
        return self._shared.inner.embed_batch(texts)


class _QuipuRanker:
    def __init__(
        self,
        mem: Any,
        path: Path,
        turns_of: Mapping[str, list[str]],
        timings: dict[str, list[float]],
    ) -> None:
        self._mem = mem
        self._path = path
        self._turns_of = turns_of
        self._timings = timings

    def rank(self, query: Query, n: int) -> list[str]:
        result = self._mem.recall(query.text, scope=SCOPE, k=n)
        for name, value in result.meta["timings"].items():
            self._timings.setdefault(f"k={n} {name}", []).append(float(value))
        ranked: list[str] = []
        for hit in result.results:
            ranked.extend(self._turns_of.get(hit.memory.id, ()))
        return ranked[:n]

    def close(self) -> None:
        """Close the store and delete its files: each haystack's store is used once."""
        self._mem.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self._path}{suffix}").unlink(missing_ok=True)


class _QuipuSystem:
    name = "quipu"

    def __init__(
        self, embedder: _SharedTurnVectors, workdir: Path, overrides: Mapping[str, Any]
    ) -> None:
        self._embedder = embedder
        self._workdir = workdir
        self._overrides = dict(overrides)
        self._stats = IngestStats()
        self._settings: dict[str, Any] = {}
        self._opened = 0
        self._timings: dict[str, list[float]] = {}

    def index(self, haystack: Haystack, advance: Callable[[int], None]) -> Ranker:
        import quipu

        self._opened += 1
        path = self._workdir / f"haystack-{self._opened}.db"
        mem = quipu.open(
            path,
            embedder=self._embedder,
            local_agent_id=haystack.haystack_id,
            **self._overrides,
        )
        if not self._settings:
            self._settings = ranking_settings(mem.service.limits)
        stats = self._stats
        turns_of: dict[str, list[str]] = {}
        self._embedder.turns.clear()
        self._embedder.recording = True
        try:
            for turn in haystack.turns:
                remember_turn(
                    mem,
                    stats,
                    turns_of,
                    turn.turn_id,
                    turn.text,
                    scope=SCOPE,
                    observed_at=turn.observed_at,
                    session_id=turn.session,
                    metadata={"turn_id": turn.turn_id, "session": turn.session},
                )
                advance(1)
        except BaseException:
            mem.close()
            raise
        finally:
            self._embedder.recording = False
        return _QuipuRanker(mem, path, turns_of, self._timings)

    def describe(self) -> dict[str, Any]:
        stats = self._stats
        return {
            "write_path": "remember() one turn at a time, embedding inline",
            "embedder": self._embedder.model_id,
            "settings": self._settings,
            "overrides": self._overrides,
            "turns": stats.turns,
            "memories": stats.memories,
            "duplicates": stats.duplicates,
            "quarantined": stats.quarantined,
            "refused": dict(sorted(stats.refused.items())),
            "recall_timings_ms": {
                name: {
                    "p50": round(percentile(values, 50), 3),
                    "p95": round(percentile(values, 95), 3),
                }
                for name, values in sorted(self._timings.items())
            },
        }


class _BaselineRanker:
    def __init__(self, baseline: BM25Baseline | DenseBaseline | HybridBaseline) -> None:
        self._baseline = baseline

    def rank(self, query: Query, n: int) -> list[str]:
        return self._baseline.rank(query.text, n)

    def close(self) -> None:
        return None


class _BM25System:
    name = "bm25"

    def index(self, haystack: Haystack, advance: Callable[[int], None]) -> Ranker:
        baseline = BM25Baseline([(turn.turn_id, turn.text) for turn in haystack.turns])
        advance(len(haystack.turns))
        return _BaselineRanker(baseline)

    def describe(self) -> dict[str, Any]:
        return {"engine": "bm25s, k1=1.5 b=0.75, English stop words, no stemmer"}


class _DenseSystem:
    name = "dense"

    def __init__(self, shared: _SharedTurnVectors) -> None:
        self._shared = shared

    def index(self, haystack: Haystack, advance: Callable[[int], None]) -> Ranker:
        baseline = DenseBaseline(
            [(turn.turn_id, turn.text) for turn in haystack.turns], _RecordedFirst(self._shared)
        )
        advance(len(haystack.turns))
        return _BaselineRanker(baseline)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": f"exact cosine kNN over {self._shared.model_id}",
            "index_vectors": "the turn vectors quipu's ingest computed (same model, same "
            "text), so index_s is not an embedding cost; queries are embedded as they come",
        }


class _HybridSystem:
    name = "hybrid"

    def __init__(self, shared: _SharedTurnVectors) -> None:
        self._shared = shared

    def index(self, haystack: Haystack, advance: Callable[[int], None]) -> Ranker:
        baseline = HybridBaseline(
            [(turn.turn_id, turn.text) for turn in haystack.turns], _RecordedFirst(self._shared)
        )
        advance(len(haystack.turns))
        return _BaselineRanker(baseline)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": "reciprocal-rank fusion (k=60, equal weights) of the bm25 ranking (turns "
            "sharing a word with the query) and the dense ranking, each cut at 100",
        }


@dataclass(frozen=True)
class Systems:
    """Quipu's pipeline and the three baselines, sharing one embedder."""

    quipu: System
    baselines: tuple[System, ...]

    def chosen(self, baselines: bool) -> list[System]:
        return [self.quipu, *(self.baselines if baselines else ())]


def make_systems(
    embedder: Embedder, workdir: Path, overrides: Mapping[str, Any] | None = None
) -> Systems:
    """Quipu (a fresh SQLite file per haystack under ``workdir``; ``overrides`` on top of the
    shipped defaults), BM25-only (bm25s), dense-only (exact kNN with ``embedder``) and their
    plain rank fusion.

    Quipu must run before the dense and hybrid baselines on each haystack (``chosen`` orders
    them so): they reuse the turn vectors Quipu's ingest computed.
    """
    shared = _SharedTurnVectors(embedder)
    return Systems(
        quipu=_QuipuSystem(shared, workdir, overrides or {}),
        baselines=(_BM25System(), _DenseSystem(shared), _HybridSystem(shared)),
    )


# --------------------------------------------------------------------------------------
# Running and reporting
# --------------------------------------------------------------------------------------


class Progress(Protocol):
    def start(self, stage: str, total: int) -> None: ...

    def advance(self, stage: str, amount: int) -> None: ...


class _Silent:
    def start(self, stage: str, total: int) -> None:
        return None

    def advance(self, stage: str, amount: int) -> None:
        return None


@dataclass
class _Measured:
    results: list[QuestionResult] = field(default_factory=list)
    tokens: list[dict[int, int]] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    """Wall time of ``rank(query, latency_k)``: the recall an agent makes."""
    ranking_ms: list[float] = field(default_factory=list)
    """Wall time of ``rank(query, depth)``: the deep ranking the metrics are computed on."""
    index_s: float = 0.0
    details: list[dict[str, Any]] = field(default_factory=list)


def run_benchmark(
    haystacks: Sequence[Haystack],
    systems: Sequence[System],
    *,
    depth: int = 50,
    ks: Sequence[int] = DEFAULT_KS,
    progress: Progress | None = None,
    details: bool = False,
    latency_k: int = 10,
) -> dict[str, Any]:
    """Index every haystack with every system, rank every question ``depth`` turns deep,
    and return the report (JSON-ready): per system, overall and per category.

    The metrics come from the ``depth``-deep ranking (deep enough to reach ``max(ks)``
    distinct sessions). Recall latency is timed on a second call at ``latency_k`` results,
    the size an agent asks for; the deep call's time is reported as ``ranking_latency_ms``.
    """
    if depth < max(ks):
        raise ValueError(f"depth {depth} is below the largest k {max(ks)}")
    progress = progress or _Silent()
    total_turns = sum(len(h.turns) for h in haystacks)
    total_queries = sum(len(h.queries) for h in haystacks)
    measured = {system.name: _Measured() for system in systems}
    for system in systems:
        progress.start(f"{system.name}: index", total_turns)
        progress.start(f"{system.name}: recall", total_queries)
    token_cache: dict[str, int] = {}

    for haystack in haystacks:
        sessions = haystack.turn_to_session()
        texts = {turn.turn_id: turn.text for turn in haystack.turns}
        for system in systems:
            out = measured[system.name]
            stage = f"{system.name}: index"
            started = time.perf_counter()
            ranker = system.index(haystack, functools.partial(progress.advance, stage))
            out.index_s += time.perf_counter() - started
            try:
                for query in haystack.queries:
                    started = time.perf_counter()
                    ranked = ranker.rank(query, depth)
                    out.ranking_ms.append((time.perf_counter() - started) * 1000.0)
                    started = time.perf_counter()
                    ranker.rank(query, latency_k)
                    out.latencies_ms.append((time.perf_counter() - started) * 1000.0)
                    result = QuestionResult(
                        question_id=query.question_id,
                        category=query.category,
                        ranked_sessions=tuple(sessions_from_ranked_turns(ranked, sessions)),
                        gold_sessions=frozenset(query.gold_sessions),
                        ranked_turns=tuple(ranked),
                        gold_turns=query.gold_turns,
                    )
                    out.results.append(result)
                    out.tokens.append(_context_tokens(ranked, texts, ks, token_cache))
                    if details:
                        out.details.append(_detail(result, ks))
                    progress.advance(f"{system.name}: recall", 1)
            finally:
                ranker.close()

    return {
        "haystacks": len(haystacks),
        "turns": total_turns,
        "questions": total_queries,
        "depth": depth,
        "latency_k": latency_k,
        "ks": list(ks),
        "systems": {
            system.name: {
                **system.describe(),
                **_system_report(measured[system.name], ks, total_turns),
                **({"per_question": measured[system.name].details} if details else {}),
            }
            for system in systems
        },
    }


def _context_tokens(
    ranked: Sequence[str], texts: Mapping[str, str], ks: Sequence[int], cache: dict[str, int]
) -> dict[int, int]:
    counts: list[int] = []
    for turn_id in ranked[: max(ks)]:
        text = texts[turn_id]
        if text not in cache:
            cache[text] = count_tokens(text)
        counts.append(cache[text])
    return {k: sum(counts[:k]) for k in ks}


def _detail(result: QuestionResult, ks: Sequence[int]) -> dict[str, Any]:
    return {
        "question_id": result.question_id,
        "category": result.category,
        "gold_sessions": sorted(map(str, result.gold_sessions)),
        "ranked_sessions": [str(s) for s in result.ranked_sessions[: max(ks)]],
        "gold_turns": sorted(result.gold_turns),
        "ranked_turns": list(result.ranked_turns[: max(ks)]),
    }


def _metric_names(ks: Sequence[int]) -> list[str]:
    names = [f"{kind}@{k}" for kind in ("all", "any") for k in ks]
    return [*names, f"ndcg@{max(ks)}", "mrr"]


def _group_report(
    results: Sequence[QuestionResult], tokens: Sequence[Mapping[int, int]], ks: Sequence[int]
) -> dict[str, Any]:
    scores = [score_question(result, ks) for result in results]
    report: dict[str, Any] = {"count": len(results)}
    for level in ("session", "turn"):
        rows = [s for s in scores if f"{level}.mrr" in s]
        if not rows:
            continue
        report[level] = {"count": len(rows)} | {
            name: sum(row[f"{level}.{name}"] for row in rows) / len(rows)
            for name in _metric_names(ks)
        }
    report["context_tokens"] = {
        f"@{k}": sum(t[k] for t in tokens) / len(tokens) if tokens else 0.0 for k in ks
    }
    return report


def _latency(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "mean": round(sum(values) / len(values), 3),
        "max": round(max(values), 3),
    }


def _system_report(measured: _Measured, ks: Sequence[int], total_turns: int) -> dict[str, Any]:
    groups: dict[str, list[int]] = {}
    for position, result in enumerate(measured.results):
        groups.setdefault(result.category, []).append(position)
    return {
        "index_s": round(measured.index_s, 3),
        "index_turns_per_s": round(total_turns / measured.index_s, 1) if measured.index_s else None,
        "recall_latency_ms": _latency(measured.latencies_ms),
        "ranking_latency_ms": _latency(measured.ranking_ms),
        "overall": _group_report(measured.results, measured.tokens, ks),
        "by_category": {
            name: _group_report(
                [measured.results[i] for i in positions],
                [measured.tokens[i] for i in positions],
                ks,
            )
            for name, positions in sorted(groups.items())
        },
    }
