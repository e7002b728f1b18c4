"""The recall pipeline: hybrid search in one scope as named stages over a narrow port.

It takes a validated query, the scope's partition, the filters and the page size, and returns
hits plus ``meta`` (RECALL-1..5, RECALL-7, RECALL-8). It knows nothing of principals, HTTP or
authorisation: a use case resolves the scope and checks who may read it, then calls
:meth:`RecallPipeline.recall`. Every plane that searches reuses it with its own port.

The stages, in order (docs/architecture.md, "Recall pipeline"):

1. :meth:`~RecallPipeline._focused` — the query without the words most of the scope holds;
2. :meth:`~RecallPipeline._embed_query` — the search vector (or the full-text fallback);
3. candidates — vector kNN and keyword search side by side, exact alias and text matches;
4. :meth:`~RecallPipeline._fuse` — score (or rank) fusion with the temporal boost and the
   session aggregate; with ``graph_weight``, :meth:`~RecallPipeline._graph_pass` (the entity
   graph's multi-hop signal, :mod:`quipu.retrieval.graph_signal`); then one feedback pass
   (:meth:`~RecallPipeline._feedback_vector`);
5. :meth:`~RecallPipeline._rerank` — the optional session cross-encoder;
6. :meth:`~RecallPipeline._shape` — rows loaded in growing windows, filters re-checked, one
   row per family, cut at ``k``;
7. ``meta`` with :func:`create_safety`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from quipu.core.limits import Limits
from quipu.core.query import Candidate, Filters, Hit, RecallResult
from quipu.core.records import MemoryVersion, ScopeRef, Status
from quipu.core.text import content_hash, fold
from quipu.embeddings.base import Embedder
from quipu.errors import EmbeddingUnavailable
from quipu.retrieval import focus, graph_signal, topic_signal
from quipu.retrieval.fusion import rrf, score_fusion, session_aggregate
from quipu.retrieval.rerank import CrossEncoder, rerank_sessions
from quipu.retrieval.temporal import query_windows, window_filters
from quipu.retrieval.vectors import Vector, toward
from quipu.storage.base import SearchInfo

log = logging.getLogger("quipu.recall")

#: Cosine similarity above which a near-identical memory "probably" exists (RECALL-7).
PROBABLE_DUPLICATE = 0.92
#: Threads running keyword searches beside the query embedding of concurrent recalls.
_SEARCH_THREADS = 8
#: Results whose vectors move the query in the feedback pass (``feedback_weight``).
_FEEDBACK_DEPTH = 3
#: Candidates of the fused ranking whose sessions the reranker may read and lift.
_RERANK_POOL = 100
_T = TypeVar("_T")
Fused = list[tuple[int, float, tuple[str, ...]]]
"""A ranking: (row key, score, which retrievers found it), best first."""


class SearchPort(Protocol):
    """What the pipeline reads from a store: candidates, exact matches, vectors and rows of
    one scope. :class:`quipu.storage.base.Store` provides it; another plane passes its own."""

    def vector_candidates(
        self, ref: ScopeRef, vector: Vector, flt: Filters, limit: int
    ) -> tuple[list[Candidate], SearchInfo]: ...

    def text_candidates(
        self, ref: ScopeRef, text: str, flt: Filters, limit: int, *, expansion: float = 0.0
    ) -> tuple[list[Candidate], SearchInfo]: ...

    def key_frequencies(self, ref: ScopeRef, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        """The scope's row count and how many rows hold each BM25 key."""

    def exact_candidates(
        self, ref: ScopeRef, folded: str, text_hash: str
    ) -> list[tuple[int, str]]: ...

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]: ...

    def sessions_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, str]: ...

    def vectors_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, Vector]: ...

    def similarities(
        self, ref: ScopeRef, keys: Sequence[int], vector: Vector
    ) -> dict[int, float]: ...


@dataclass(frozen=True)
class RecallQuery:
    """A validated recall: the query text, the scope partition, the filters and the page size.
    ``planes`` is the source selector (RECALL-8); ``sources`` the planes the backend can read."""

    text: str
    ref: ScopeRef
    filters: Filters
    size: int
    planes: frozenset[str] = frozenset({"facts"})
    sources: frozenset[str] = frozenset({"facts"})


class RecallPipeline:
    """Hybrid recall over a :class:`SearchPort`. Thread-safe: at most ``recall_concurrency``
    recalls run at once (the rest wait in :meth:`recall`); keyword searches of concurrent
    recalls run on a small shared thread pool."""

    def __init__(
        self,
        port: SearchPort,
        embedder: Embedder | None,
        limits: Limits,
        clock: Callable[[], datetime],
        reranker: CrossEncoder | None = None,
    ) -> None:
        self.port = port
        self.embedder = embedder
        self.limits = limits
        self.reranker = reranker
        self._clock = clock
        #: The entity graph, when the port holds one (the memory store): ``graph_weight``.
        self.graph = port if isinstance(port, graph_signal.GraphPort) else None
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        slots = limits.recall_concurrency
        self._slots: AbstractContextManager[Any] = (
            threading.BoundedSemaphore(slots) if slots is not None else nullcontext()
        )

    def close(self) -> None:
        """Stop the search threads."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def _search_pool(self) -> ThreadPoolExecutor:
        """Threads for the keyword search of concurrent recalls, started on first use."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(_SEARCH_THREADS, "quipu-search")
        return self._pool

    def recall(self, query: RecallQuery, started: float) -> RecallResult:
        """Run every stage for ``query``; ``started`` (``time.perf_counter()``) is when the
        caller began, so ``meta.timings.total_ms`` includes validation and the wait for a slot.

        Measured on 2 cores, `quipu serve --workers 2`, 8 concurrent clients: one recall per
        process at a time gave 239-266 requests/s at p95 39-51 ms, no bound ~220 at p95 ~60 ms
        (docs/benchmarks.md)."""
        with self._slots:
            return self._recall(query, started)

    def _recall(self, query: RecallQuery, started: float) -> RecallResult:
        ref, text, flt, size = query.ref, query.text, query.filters, query.size
        timings: dict[str, float] = {}
        depth = max(self.limits.candidate_depth, size)
        # read before the keyword search holds the scope (SQLite: its index lock)
        focused = self._focused(ref, text, timings)
        # The keyword search needs no vector: it runs while the query is embedded and the
        # vector search runs (on PostgreSQL, in a second server process) -- unless each recall
        # has one core to itself (recall_concurrency 1), where a second thread only adds
        # handoffs: 2 cores, --workers 2, c=8: ~285 -> ~300 requests/s, p95 -3 ms inline.
        keyword: Future[tuple[tuple[list[Candidate], SearchInfo], float]]
        if self.limits.recall_concurrency == 1:
            keyword = Future()
            keyword.set_result(_timed(self._text_candidates, ref, text, flt, depth))
        else:
            keyword = self._search_pool().submit(
                _timed, self._text_candidates, ref, text, flt, depth
            )
        fallback, reason, vector = self._embed_query(text, focused, timings)

        lists: dict[str, list[Candidate]] = {}
        paths: dict[str, str] = {}
        cache = _RecallCache()  # what the first pass looked up, for the feedback pass
        mark = time.perf_counter()
        if vector is not None:
            lists["semantic"], info = self.port.vector_candidates(ref, vector, flt, depth)
            paths["semantic"] = info.path
            cache.learn(info)
        timings["vector_ms"] = _ms(mark)
        (lists["text"], info), timings["text_ms"] = keyword.result()
        paths["text"] = info.path
        cache.learn(info)

        top_semantic = lists.get("semantic", [])[:1]
        mark = time.perf_counter()
        exact = self.port.exact_candidates(ref, fold(text), content_hash(text))
        fused = self._fuse(ref, text, vector, flt, depth, lists, cache)
        timings["fuse_ms"] = _ms(mark)
        if self.graph is not None and self.limits.graph_weight > 0 and fused:
            mark = time.perf_counter()
            fused = self._graph_pass(ref, text, vector, flt, depth, lists, cache, fused)
            timings["graph_ms"] = _ms(mark)
        if self.limits.topic_weight > 0 and fused:
            mark = time.perf_counter()
            fused = self._topic_pass(ref, text, vector, flt, depth, lists, cache, fused)
            timings["topic_ms"] = _ms(mark)
        if vector is not None and self.limits.feedback_weight > 0 and self.limits.fusion != "rrf":
            mark = time.perf_counter()
            top = self.port.vectors_of(ref, [key for key, _, _ in fused[:_FEEDBACK_DEPTH]])
            second = self._feedback_vector(vector, fused, top)
            if second is not None:
                pool = list(dict.fromkeys(c.key for found in lists.values() for c in found))
                near = self.port.similarities(ref, pool, second)
                lists["semantic"] = _ranked(near, depth + len(cache.graph_rows))
                fused = self._fuse(ref, text, second, flt, depth, lists, cache)
            timings["feedback_ms"] = _ms(mark)
        reranked = False
        if self.reranker is not None and fused:
            mark = time.perf_counter()
            fused, reranked = self._rerank(ref, text, fused, flt, cache)
            timings["rerank_ms"] = _ms(mark)
        mark = time.perf_counter()
        hits = self._shape(exact, fused, flt, size)
        timings["load_ms"] = _ms(mark)
        timings["total_ms"] = _ms(started)

        meta = {
            "total": len(hits),
            "limit": size,
            "fallback": fallback,
            "reason": reason,
            "underfilled": len(hits) < size,
            "sources_applied": query.planes <= query.sources,
            "create_safety": create_safety(hits, exact, top_semantic),
            "reranked": reranked,
            "paths": paths,
            "scope": ref.scope.value,
            "timings": {name: round(value, 3) for name, value in timings.items()},
        }
        return RecallResult(hits, meta)

    # -- stages ------------------------------------------------------------------------------
    def _focused(self, ref: ScopeRef, text: str, timings: dict[str, float]) -> str | None:
        """The query without the words most of the scope's memories hold
        (:mod:`quipu.retrieval.focus`); ``None`` when no word is that common, or
        ``focus_weight`` is 0, or there is no embedder."""
        if self.limits.focus_weight <= 0 or self.embedder is None:
            return None
        mark = time.perf_counter()
        keys = [key for _, key in focus.word_keys(text) if key is not None]
        rows, frequencies = self.port.key_frequencies(ref, keys) if keys else (0, {})
        timings["focus_ms"] = _ms(mark)
        return focus.focused_query(text, rows, frequencies, share=self.limits.focus_share)

    def _embed_query(
        self, text: str, focused: str | None, timings: dict[str, float]
    ) -> tuple[bool, str | None, Vector | None]:
        """(fallback, reason, the search vector): the query's vector, mixed with the vector of
        its ``focused`` form (:meth:`_focused`) when there is one, both embedded in one call."""
        if self.embedder is None:
            return True, "embedder_disabled", None
        mark = time.perf_counter()
        try:
            if focused is None:
                vector = self.embedder.embed_query(text)
            else:
                plain, narrow = self.embedder.embed_queries([text, focused])
                vector = focus.mix(plain, narrow, self.limits.focus_weight)
        except EmbeddingUnavailable:
            timings["embed_ms"] = _ms(mark)
            return True, "embedder_unavailable", None
        timings["embed_ms"] = _ms(mark)
        return False, None, vector

    def _text_candidates(
        self, ref: ScopeRef, text: str, flt: Filters, depth: int
    ) -> tuple[list[Candidate], SearchInfo]:
        """The port's keyword search with this pipeline's ``query_expansion``."""
        return self.port.text_candidates(
            ref, text, flt, depth, expansion=self.limits.query_expansion
        )

    def _fuse(
        self,
        ref: ScopeRef,
        text: str,
        vector: Vector | None,
        flt: Filters,
        depth: int,
        lists: dict[str, list[Candidate]],
        cache: _RecallCache,
    ) -> Fused:
        """One ranking of the candidate lists: by rank (``rrf``) or by score, with the temporal
        boost and the session aggregate."""
        if self.limits.fusion == "rrf":
            return rrf(
                lists,
                {"semantic": self.limits.weight_vector, "text": self.limits.weight_text},
                self.limits.rrf_k,
            )
        fused = score_fusion(
            lists.get("semantic", []),
            lists["text"],
            weight_vector=self.limits.weight_vector,
            weight_text=self.limits.weight_text,
            boosts=self._temporal_boosts(ref, text, vector, flt, depth, lists, cache),
        )
        if cache.graph:
            fused = graph_signal.apply(fused, cache.graph)
        if cache.topic:
            fused = graph_signal.apply(fused, cache.topic, label="topic")
        if self.limits.session_weight > 0 and fused:
            sessions = self._sessions(ref, [key for key, _, _ in fused], cache)
            fused = session_aggregate(
                fused,
                {key: s for key, s in sessions.items() if s is not None},
                weight=self.limits.session_weight,
            )
        return fused

    def _graph_pass(
        self,
        ref: ScopeRef,
        text: str,
        vector: Vector | None,
        flt: Filters,
        depth: int,
        lists: dict[str, list[Candidate]],
        cache: _RecallCache,
        fused: Fused,
    ) -> Fused:
        """The ranking again with the entity graph's multi-hop signal
        (:mod:`quipu.retrieval.graph_signal`): rows linked to the first hits and to the
        query's entities through the entities they name gain, and may join the candidates."""
        assert self.graph is not None
        rows, _ = self.port.key_frequencies(ref, [])
        links = self.graph.graph_links(
            ref,
            [key for key, _, _ in fused[: graph_signal.SEED_ROWS]],
            graph_signal.query_keys(text),
            graph_signal.fanout(rows, self.limits.graph_share),
        )
        scores = graph_signal.spread(links, graph_signal.seed_weights(fused))
        if not scores:
            return fused
        cache.graph = graph_signal.boosts(scores, self.limits.graph_weight)
        known = {c.key for found in lists.values() for c in found}
        fresh = graph_signal.new_rows(scores, known)
        cache.graph_rows = fresh
        if fresh and vector is not None:
            near = self.port.similarities(ref, fresh, vector)
            lists["semantic"] = [*lists.get("semantic", []), *_ranked(near, len(fresh))]
        elif fresh:
            lists["text"] = [*lists["text"], *(Candidate(key, 0.0) for key in fresh)]
        return self._fuse(ref, text, vector, flt, depth, lists, cache)

    def _topic_pass(
        self,
        ref: ScopeRef,
        text: str,
        vector: Vector | None,
        flt: Filters,
        depth: int,
        lists: dict[str, list[Candidate]],
        cache: _RecallCache,
        fused: Fused,
    ) -> Fused:
        """The ranking again with the topic links' multi-hop signal
        (:mod:`quipu.retrieval.topic_signal`): rows holding the distinctive words the first
        hits share gain, and may join the candidates."""
        seeds = topic_signal.seed_weights(fused)
        loaded = self.port.load(list(seeds))
        words = topic_signal.seed_words({key: row.text for key, row in loaded.items()})
        stems = sorted({stem for own in words.values() for stem in own})
        rows, frequencies = self.port.key_frequencies(ref, stems) if stems else (0, {})
        walk = topic_signal.topic(seeds, words, text, rows, frequencies, self.limits.topic_share)
        most = topic_signal.limit(rows, self.limits.topic_share)
        holders = {
            word: [c.key for c in self.port.text_candidates(ref, word, flt, most)[0]]
            for word in walk.words
        }
        cache.topic = topic_signal.gains(
            topic_signal.spread(walk, holders), self.limits.topic_weight
        )
        if not cache.topic:
            return fused
        known = {c.key for found_ in lists.values() for c in found_}
        fresh = topic_signal.new_rows(cache.topic, known)
        cache.graph_rows = [*cache.graph_rows, *fresh]
        if fresh and vector is not None:
            near = self.port.similarities(ref, fresh, vector)
            lists["semantic"] = [*lists.get("semantic", []), *_ranked(near, len(fresh))]
        elif fresh:
            lists["text"] = [*lists["text"], *(Candidate(key, 0.0) for key in fresh)]
        return self._fuse(ref, text, vector, flt, depth, lists, cache)

    def _temporal_boosts(
        self,
        ref: ScopeRef,
        text: str,
        vector: Vector | None,
        flt: Filters,
        depth: int,
        lists: dict[str, list[Candidate]],
        cache: _RecallCache,
    ) -> dict[int, float]:
        """``temporal_boost`` for the candidates observed within a date the query names."""
        boost = self.limits.temporal_boost
        pool = {c.key for candidates in lists.values() for c in candidates}
        boosts: dict[int, float] = {}
        for at, window in enumerate(query_windows(text) if boost > 0 else []):
            narrowed = window_filters(flt, window)
            if narrowed is None:
                continue
            if at not in cache.keyword_inside:  # the same in both passes: searched once
                cache.keyword_inside[at] = self._text_candidates(ref, text, narrowed, depth)[0]
            inside = list(cache.keyword_inside[at])
            if vector is not None:
                inside += self.port.vector_candidates(ref, vector, narrowed, depth)[0]
            boosts.update((c.key, boost) for c in inside if c.key in pool)
        return boosts

    def _sessions(
        self, ref: ScopeRef, keys: list[int], cache: _RecallCache
    ) -> dict[int, str | None]:
        """The session of each of ``keys`` (None: written outside one), looked up in the port
        only for keys this recall has not seen yet."""
        seen = cache.sessions
        missing = [key for key in keys if key not in seen]
        if missing:
            found = self.port.sessions_of(ref, missing)
            seen.update((key, found.get(key)) for key in missing)
        return {key: seen[key] for key in keys}

    def _feedback_vector(
        self, vector: Vector, fused: Fused, vectors: Mapping[int, Vector]
    ) -> Vector | None:
        """Pseudo-relevance feedback (Rocchio): the query moved toward its top 3 results, so
        the pool's rows near them rise (measured in docs/benchmarks.md). ``None`` when no top
        result has a vector."""
        top = [vectors[key] for key, _, _ in fused[:_FEEDBACK_DEPTH] if key in vectors]
        if not top:
            return None
        return toward(vector, np.mean(top, axis=0), self.limits.feedback_weight)

    def _rerank(
        self, ref: ScopeRef, text: str, fused: Fused, flt: Filters, cache: _RecallCache
    ) -> tuple[Fused, bool]:
        """``fused`` reranked by session with the cross-encoder (``reranker`` setting), and
        whether it was. Only candidates the page may show take part (the filters of
        :meth:`_shape`); a model that fails to run leaves the ranking as it was."""
        assert self.reranker is not None
        pool = [key for key, _, _ in fused[:_RERANK_POOL]]
        loaded = self.port.load(pool)
        now = self._clock()
        usable: dict[int, MemoryVersion] = {}
        families: set[str] = set()
        for key in pool:
            memory = loaded.get(key)
            if memory is not None and shown(memory, flt, now, families):
                families.add(memory.id)
                usable[key] = memory
        sessions = self._sessions(ref, list(usable), cache)
        session_of = {key: sessions[key] or f"memory:{key}" for key in usable}
        try:
            return rerank_sessions(
                fused,
                session_of,
                {key: memory.text for key, memory in usable.items()},
                text,
                self.reranker.score,
                sessions=self.limits.rerank_sessions,
                turns=self.limits.rerank_turns,
                weight=self.limits.rerank_weight,
            ), True
        except Exception:  # onnxruntime's errors are not importable API; recall goes on
            log.exception("reranker failed; the recall keeps its fused ranking")
            return fused, False

    def _shape(
        self, exact: list[tuple[int, str]], fused: Fused, flt: Filters, size: int
    ) -> list[Hit]:
        """The page: exact matches first, then the fused ranking; rows that fail a filter or
        repeat a family are skipped."""
        labels: dict[int, list[str]] = {}
        for key, label in exact:
            labels.setdefault(key, []).append(label)
        fused_found = {key: found for key, _, found in fused}
        order: Fused = [
            (key, 1.0 + 1.0 / (1 + i), fused_found.get(key, ())) for i, key in enumerate(labels)
        ]
        order += [(key, score, found) for key, score, found in fused if key not in labels]
        hits: list[Hit] = []
        families: set[str] = set()
        now = self._clock()
        # Rows are loaded in growing windows: most pages fill from the first ``size + 4``
        # candidates, and loading (decoding) rows is a large share of a recall's CPU.
        start, window = 0, size + len(labels) + 4
        while start < len(order) and len(hits) < size:
            chunk = order[start : start + window]
            loaded = self.port.load([key for key, _, _ in chunk])
            for key, score, found in chunk:
                memory = loaded.get(key)
                if memory is None or not shown(memory, flt, now, families):
                    continue
                matched = tuple(labels.get(key, [])) + found
                families.add(memory.id)
                hits.append(Hit(memory, score, len(hits) + 1, matched))
                if len(hits) == size:
                    break
            start += len(chunk)
            window *= 2
        return hits


def create_safety(
    hits: Sequence[Hit], exact: Sequence[tuple[int, str]], top_semantic: Sequence[Candidate]
) -> str:
    """RECALL-7: ``exists`` when an exact alias or text match is among the first three hits,
    ``probable`` when the best vector candidate is a near-identical memory, else ``unknown``."""
    near_top = (label for h in hits if h.rank <= 3 for label in h.matched)
    if exact and any(label in ("alias", "text") for label in near_top):
        return "exists"
    if top_semantic and top_semantic[0].score >= PROBABLE_DUPLICATE:
        return "probable"
    return "unknown"


def shown(memory: MemoryVersion, flt: Filters, now: datetime, families: set[str]) -> bool:
    """Whether a recall page may show ``memory``: it passes the filters (re-checked on the row),
    is current and valid (unless the recall reads ``as_of``), and no version of its family is
    already in ``families``."""
    if memory.id in families or not flt.accepts(memory):
        return False
    return flt.as_of is not None or _current_and_valid(memory, now)


def _current_and_valid(memory: MemoryVersion, now: datetime) -> bool:
    if not memory.is_current:
        return False
    return memory.status is not Status.ACTIVE or (
        memory.valid_at <= now and (memory.invalid_at is None or now < memory.invalid_at)
    )


@dataclass
class _RecallCache:
    """Lookups of one recall that its feedback pass would otherwise repeat."""

    sessions: dict[int, str | None] = field(default_factory=dict)
    """Session id of each candidate looked up (None: written outside a session)."""
    keyword_inside: dict[int, list[Candidate]] = field(default_factory=dict)
    """Keyword candidates inside each date window the query names, by window."""
    graph: dict[int, float] = field(default_factory=dict)
    """What each row gains from the entity graph (``graph_weight``), for both passes."""
    graph_rows: list[int] = field(default_factory=list)
    """Rows the entity graph or topic links brought into the candidates (kept by the
    feedback pass)."""
    topic: dict[int, float] = field(default_factory=dict)
    """What each row gains from topic links (``topic_weight``), for both passes."""

    def learn(self, info: SearchInfo) -> None:
        """Keep the sessions a search read with its rows (no ``sessions_of`` for those)."""
        if info.sessions:
            self.sessions.update(info.sessions)


def _ranked(scores: Mapping[int, float], limit: int) -> list[Candidate]:
    """``scores`` as candidates, best first (ties on key), at most ``limit``.

    The feedback pass ranks only what the first pass found (its vector and keyword
    candidates) by their similarity to the moved query, instead of searching the scope
    again: the moved query stays close to the first, and on LoCoMo and LongMemEval the pool
    gives the same rankings as a second full search (docs/benchmarks.md)."""
    ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [Candidate(key, score) for key, score in ordered]


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


def _timed(search: Callable[..., _T], *args: Any) -> tuple[_T, float]:
    """``search(*args)`` and the milliseconds it took (for ``meta.timings``)."""
    mark = time.perf_counter()
    return search(*args), _ms(mark)
