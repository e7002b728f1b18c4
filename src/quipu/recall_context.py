"""Merged recall (RECALL-9, SCOPE-4): one call reads several memory scopes and the knowledge
plane, and answers one ranked, deduplicated, diverse, budgeted list with a ledger of why each
row was chosen, plus a rendered, defanged block a model can read as is.

- Each scope is read by the memory plane's own recall (SCOPE-4: one read per scope, each row
  labelled with its scope); the knowledge half runs :meth:`KnowledgeService.search` on an
  over-fetched pool and :func:`~quipu.retrieval.selection.diversify` chooses from it.
- The order is deterministic: score (rounded to 6 places) descending, then source
  (``knowledge`` before ``memory``), then id — an unchanged store and query give a
  byte-identical ``results`` array. ``meta.recall_id`` is new on every call.
- A half that fails or times out leaves ``degraded: true`` and a reason; the other half still
  answers. A bad argument is a 4xx before anything is read.
- :meth:`MergedRecall.referenced` records which surfaced items a client used: only ids this
  recall surfaced to this caller's subject (422 ``not_surfaced`` for the whole call otherwise).
  References are never read by any ranking.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.core import validate
from quipu.core.knowledge import SHOWN_PER_SESSION, SHOWN_TTL, RecallLedger, subject_of
from quipu.core.query import Filters, Hit, RecallResult
from quipu.core.records import Principal
from quipu.core.scopes import parse_scope, resolve_scope
from quipu.embeddings.memo import QueryMemo
from quipu.errors import InvalidInput, QuipuError
from quipu.knowledge import KnowledgeService
from quipu.retrieval.knowledge_index import body_hash
from quipu.retrieval.pipeline import RecallPipeline, RecallQuery
from quipu.retrieval.selection import (
    Knobs,
    Pooled,
    answer_confidence,
    diversify,
    fit_budget,
    tokens_estimate,
)
from quipu.safety import render_data_block
from quipu.storage.base import Store

log = logging.getLogger(__name__)

#: Longest session id, in UTF-8 bytes (longer is 422 ``invalid_session_id``, never truncated).
MAX_SESSION_BYTES = 200
#: Most ids one ``referenced`` call may name.
MAX_REFERENCED = 50
#: Most scopes one call may read.
MAX_SCOPES = 5
#: Default and largest token budget of the answer.
DEFAULT_BUDGET = 2000
MAX_BUDGET = 100_000
#: Seconds the knowledge half may take before the answer goes on without it (degraded).
KNOWLEDGE_TIMEOUT = 5.0


@dataclass(frozen=True)
class ContextResult:
    """A merged recall: the rows, the rendered block and ``meta`` (with the ledger)."""

    results: list[dict[str, Any]]
    text: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def recall_id(self) -> str:
        return str(self.meta["recall_id"])

    def to_dict(self) -> dict[str, Any]:
        return {"results": self.results, "text": self.text, "meta": self.meta}


class ShownHistory:
    """Articles already shown per (tenant, subject, session), kept in the store
    (``knowledge_shown``), so every worker and process over one store sees what the others
    showed. Rows older than :data:`~quipu.core.knowledge.SHOWN_TTL` count for nothing (the
    prune job deletes them) and a session reads back its 500 most recent. Best effort: a
    store that cannot answer re-shows an article, which costs a repeat, never the recall."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime],
        *,
        ttl: timedelta = SHOWN_TTL,
        per_session: int = SHOWN_PER_SESSION,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.per_session = per_session
        self._clock = clock
        #: Reads and writes of the history that failed (their recall went on without it).
        self.failures = 0

    def seen(self, principal: Principal, session: str) -> frozenset[str]:
        since = self._clock() - self.ttl
        try:
            return self.store.shown_get(
                principal.tenant_id, subject_of(principal), session, since, self.per_session
            )
        except QuipuError as exc:
            if exc.status < 500:
                raise
            self.failures += 1
            log.warning("reading the shown history failed: %s", exc.code)
            return frozenset()

    def add(self, principal: Principal, session: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        try:
            self.store.shown_add(
                principal.tenant_id,
                subject_of(principal),
                session,
                principal.user_id,
                ids,
                self._clock(),
            )
        except QuipuError as exc:
            if exc.status < 500:
                raise
            self.failures += 1
            log.warning("recording the shown history failed: %s", exc.code)


class MergedRecall:
    """``recall_context`` and ``referenced`` over the memory and knowledge use cases."""

    def __init__(
        self,
        knowledge: KnowledgeService,
        *,
        knowledge_timeout: float = KNOWLEDGE_TIMEOUT,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.knowledge = knowledge
        self.memories = knowledge.memories
        self.store = knowledge.store
        memories = knowledge.memories
        # every read of one call embeds the same query: once, through the memo
        memo = None if memories.embedder is None else QueryMemo(memories.embedder)
        knowledge.query_embedder = memo
        self._recall = RecallPipeline(
            memories.store, memo, memories.limits, memories._clock, memories.reranker
        )
        self.knowledge_timeout = knowledge_timeout
        self._clock = clock or (lambda: datetime.now(UTC))
        self.history = ShownHistory(self.store, self._clock)
        # the knowledge search and all scopes but one of each call (MAX_SCOPES), two calls
        self._pool = ThreadPoolExecutor(2 * MAX_SCOPES, "quipu-context")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._recall.close()

    def recall_context(
        self,
        principal: Principal,
        query: object,
        *,
        scopes: object = ("agent",),
        include_knowledge: object = True,
        budget_tokens: object = DEFAULT_BUDGET,
        session_id: object = None,
        k: object = None,
        project: object = None,
        diversity: object = None,
    ) -> ContextResult:
        """Memory of each of ``scopes`` and (``include_knowledge``) the knowledge plane in one
        ranked list of at most ``k`` rows that fits ``budget_tokens`` (see the module)."""
        started = time.perf_counter()
        lim = self.memories.limits
        text = validate.query(query, max_chars=lim.max_query_chars)
        names = _scopes(scopes)
        for name in names:
            resolve_scope(principal, name)  # 4xx now, not a degraded half later
        if not isinstance(include_knowledge, bool):
            raise InvalidInput(
                "include_knowledge must be true or false", details={"field": "include_knowledge"}
            )
        size = validate.bounded_int(
            lim.default_k if k is None else k, field="k", low=1, high=lim.max_k
        )
        budget = validate.bounded_int(budget_tokens, field="budget_tokens", low=1, high=MAX_BUDGET)
        session = _session(session_id)
        knobs = _knobs(diversity)
        project_v = validate.optional_id(project, field="project")
        degraded: list[str] = []

        pending = None
        if include_knowledge:
            pending = self._pool.submit(
                self.knowledge.search,
                principal,
                text,
                k=min(lim.max_k, knobs.pool_size(size) if knobs.enabled else size),
                project=project_v,
            )
        flt = self.memories.guard.filters(project=project_v)
        memory_rows: list[dict[str, Any]] = []
        considered_memory = 0
        # The scopes are read at once, each on a pool thread (the last here): their SQLite,
        # numpy and ONNX work releases the interpreter lock, and the query is embedded once
        # for all of them (QueryMemo). Results are taken in the order of ``names``.
        reads = [
            self._pool.submit(self._read_scope, principal, text, name, flt, size, started)
            for name in names[:-1]
        ]
        last = _Done.run(self._read_scope, principal, text, names[-1], flt, size, started)
        for name, read in zip(names, [*reads, last], strict=True):
            try:
                found = read.result()
            except QuipuError as exc:
                if exc.status < 500:
                    raise
                degraded.append(f"memory_{name}_{exc.code}")
                continue
            fallback = bool(found.meta.get("fallback"))
            if fallback:
                degraded.append(f"memory_{name}_{found.meta.get('reason') or 'fallback'}")
            considered_memory += len(found.results)
            memory_rows += [_memory_row(h, name, fallback) for h in found.results]

        knowledge_rows: list[dict[str, Any]] = []
        considered_knowledge = 0
        counts: dict[str, Any] = {}
        confidence: tuple[str, float | None] = ("none", None)
        if pending is not None:
            try:
                result = pending.result(timeout=self.knowledge_timeout)
            except FutureTimeout:
                pending.cancel()
                degraded.append("knowledge_timeout")
                result = None
            except QuipuError as exc:
                if exc.status < 500:
                    raise
                degraded.append(f"knowledge_{exc.code}")
                result = None
            if result is not None:
                fallback = bool(result.meta.get("fallback"))
                if fallback:
                    degraded.append(f"knowledge_{result.meta.get('reason') or 'fallback'}")
                snap = self.knowledge.snapshot(principal.tenant_id)
                pool = []
                for hit in result.results:
                    at = snap.by_id.get(hit.article.id)
                    vector = snap.vectors[at] if at is not None and snap.has_vector[at] else None
                    digest = hit.article.content_hash or body_hash(hit.article.body)
                    pool.append(Pooled(hit.article.id, hit.score, digest, vector))
                seen = self.history.seen(principal, session) if session else frozenset()
                chosen, counts = diversify(pool, size, seen, knobs)
                considered_knowledge = len(pool)
                by_id = {h.article.id: h for h in result.results}
                knowledge_rows = [_knowledge_row(by_id[i], fallback) for i in chosen]
                confidence = answer_confidence([h.score for h in result.results])

        merged = sorted(
            memory_rows + knowledge_rows,
            key=lambda r: (-r["score"], r["source"], r["id"], r.get("scope", "")),
        )
        offered = merged[:size]
        kept, cut = fit_budget(offered, budget)
        for rank, row in enumerate(kept, start=1):
            row["rank"] = rank
        recall_id = uuid.uuid4().hex
        now = self._clock()
        surfaced = tuple(dict.fromkeys(r["id"] for r in kept))
        self.store.recall_put(
            RecallLedger(principal.tenant_id, recall_id, subject_of(principal), surfaced, now)
        )
        if session:
            self.history.add(
                principal, session, [r["id"] for r in kept if r["source"] == "knowledge"]
            )
        selected_tokens = sum(int(r["tokens_estimate"]) for r in kept)
        candidate_tokens = sum(int(r["tokens_estimate"]) for r in offered)
        verdict, separation = confidence
        meta: dict[str, Any] = {
            "recall_id": recall_id,
            "degraded": bool(degraded),
            "degraded_reason": ",".join(degraded) or None,
            "scopes": names,
            "include_knowledge": include_knowledge,
            "candidates_considered": {
                "memory": considered_memory,
                "knowledge": considered_knowledge,
                "total": considered_memory + considered_knowledge,
            },
            "selected_count": len(kept),
            "knowledge_count": sum(r["source"] == "knowledge" for r in kept),
            "memory_count": sum(r["source"] == "memory" for r in kept),
            "budget_tokens": budget,
            "tokens_selected": selected_tokens,
            "tokens_candidates": candidate_tokens,
            "tokens_saved_vs_candidates": candidate_tokens - selected_tokens,
            "token_estimate": "utf8_bytes/4",
            "cut": [
                {"id": r["id"], "source": r["source"], "tokens_estimate": r["tokens_estimate"]}
                for r in cut
            ],
            "diversity": counts,
            "answer_confidence": verdict,
            "answer_separation": separation,
            "results_ranking": "heuristic_cross_source",
            "session_applied": session is not None,
            "total_ms": round((time.perf_counter() - started) * 1000.0, 3),
        }
        return ContextResult(kept, render(kept), meta)

    def _read_scope(
        self,
        principal: Principal,
        text: str,
        scope: str,
        flt: Filters,
        size: int,
        started: float,
    ) -> RecallResult:
        """One scope's memory recall (SCOPE-4), as :meth:`MemoryService.recall` runs it, with
        this call's query vector shared; its hits go to the usage recorder (RECALL-6)."""
        ref = resolve_scope(principal, scope)
        query = RecallQuery(
            text=text,
            ref=ref,
            filters=flt,
            size=size,
            sources=self.store.capabilities.sources,
        )
        result = self._recall.recall(query, started)
        usage = self.memories.usage
        if usage is not None and result.results:
            usage.offer(ref.tenant_id, text, result)
        return result

    def referenced(self, principal: Principal, recall_id: object, ids: object) -> dict[str, Any]:
        """Record that the caller used ``ids`` of recall ``recall_id`` (RECALL-9). Every id must
        have been surfaced by that recall to this caller's subject, else 422 ``not_surfaced``
        and nothing is written; at most 50 ids; repeats count once."""
        try:
            rid = validate.identifier(recall_id, field="recall_id")
        except InvalidInput:
            raise InvalidInput(
                "recall_id is not a recall id",
                code="invalid_recall_id",
                details={"field": "recall_id"},
            ) from None
        if isinstance(ids, str) or not isinstance(ids, list | tuple) or not ids:
            raise InvalidInput(
                "ids must be a non-empty list of ids", code="invalid_ids", details={"field": "ids"}
            )
        if len(ids) > MAX_REFERENCED:
            raise InvalidInput(
                f"at most {MAX_REFERENCED} ids per call",
                code="too_many_ids",
                details={"field": "ids", "limit": MAX_REFERENCED},
            )
        wanted: list[str] = []
        for at, raw in enumerate(ids):
            try:
                wanted.append(validate.identifier(raw, field=f"ids[{at}]"))
            except InvalidInput:
                raise InvalidInput(
                    "each id must be an id", code="invalid_ids", details={"field": f"ids[{at}]"}
                ) from None
        ledger = self.store.recall_get(principal.tenant_id, rid)
        surfaced = (
            frozenset(ledger.items)
            if ledger is not None and ledger.subject == subject_of(principal)
            else frozenset()
        )
        missing = [i for i in dict.fromkeys(wanted) if i not in surfaced]
        if missing:
            raise InvalidInput(
                "only ids this recall surfaced to you can be referenced; nothing was recorded",
                code="not_surfaced",
                details={"recall_id": rid, "not_surfaced": missing[:MAX_REFERENCED]},
            )
        distinct = list(dict.fromkeys(wanted))
        added = self.store.recall_reference(
            principal.tenant_id, rid, subject_of(principal), distinct, self._clock()
        )
        return {"recall_id": rid, "accepted": len(distinct), "new": added}


def render(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as one defanged data block a model can read as is (SAFE-2)."""
    lines = []
    for row in rows:
        if row["source"] == "memory":
            day = str(row["recorded_at"])[:10]
            lines.append(f"memory of {row['scope']}, recorded {day}: {row['text']}")
        else:
            day = str(row["recorded_at"])[:10]
            what = f" ({row['category']})" if row.get("category") else ""
            lines.append(f'knowledge "{row["title"]}"{what}, updated {day}: {row["snippet"]}')
    return render_data_block(lines, "context")


def _reason(matched: Sequence[str], fallback: bool) -> str:
    """The selection reason of a row from what found it."""
    found = set(matched)
    if "alias" in found:
        return "alias"
    if fallback:
        return "keyword_fallback"
    if {"semantic", "text"} <= found:
        return "keyword+semantic"
    if "semantic" in found:
        return "semantic"
    if "text" in found:
        return "keyword"
    return "unscored"


def _memory_row(hit: Hit, scope: str, fallback: bool) -> dict[str, Any]:
    m = hit.memory
    row: dict[str, Any] = {
        "source": "memory",
        "scope": scope,
        "id": m.id,
        "version": m.version,
        "kind": m.kind.value,
        "text": m.text,
        "tags": list(m.tags),
        "project": m.project,
        "recorded_at": m.recorded_at.isoformat(),
        "score": round(hit.score, 6),
        "selection_reason": _reason(hit.matched, fallback),
    }
    row["tokens_estimate"] = tokens_estimate(m.text)
    return row


def _knowledge_row(hit: Any, fallback: bool) -> dict[str, Any]:
    a = hit.article
    row: dict[str, Any] = {
        "source": "knowledge",
        "scope": "knowledge",
        "id": a.id,
        "version": a.version,
        "title": a.title,
        "category": a.category,
        "tags": list(a.tags),
        "project": a.project,
        "status": a.status.value,
        "recorded_at": a.recorded_at.isoformat(),
        "snippet": hit.snippet,
        "score": round(hit.score, 6),
        "selection_reason": _reason(hit.matched, fallback),
    }
    row["tokens_estimate"] = tokens_estimate(f"{a.title}\n{hit.snippet}")
    return row


def _scopes(value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value or len(value) > MAX_SCOPES:
        raise InvalidInput(
            f"scopes must be a list of 1 to {MAX_SCOPES} scope names",
            code="invalid_scope",
            details={"field": "scopes"},
        )
    names: list[str] = []
    for raw in value:
        if not isinstance(raw, str):
            raise InvalidInput(
                "each scope must be a scope name", code="invalid_scope", details={"field": "scopes"}
            )
        name = parse_scope(raw).value
        if name not in names:
            names.append(name)
    return names


def _session(value: object) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value
        or validate.string_problem(value) is not None
        or len(value.encode("utf-8", "surrogatepass")) > MAX_SESSION_BYTES
    ):
        raise InvalidInput(
            f"session_id must be a string of 1 to {MAX_SESSION_BYTES} bytes",
            code="invalid_session_id",
            details={"field": "session_id", "limit_bytes": MAX_SESSION_BYTES},
        )
    return value


def _knobs(value: object) -> Knobs:
    """Per-call diversity overrides: ``enabled``, ``lambda`` (0-1), ``near_dup_threshold``
    (0.5-1), ``over_fetch`` (1-10), ``max_pool`` (1-100)."""
    if value is None:
        return Knobs()
    if not isinstance(value, dict):
        raise InvalidInput("diversity must be an object", code="invalid_diversity")
    allowed = {"enabled", "lambda", "near_dup_threshold", "over_fetch", "max_pool"}
    unknown = set(value) - allowed
    if unknown:
        raise InvalidInput(
            f"unknown diversity settings: {sorted(map(str, unknown))}", code="invalid_diversity"
        )
    base = Knobs()
    enabled = value.get("enabled", base.enabled)
    if not isinstance(enabled, bool):
        raise InvalidInput("diversity.enabled must be true or false", code="invalid_diversity")
    return Knobs(
        enabled=enabled,
        lam=_fraction(value.get("lambda", base.lam), "lambda", 0.0),
        near_duplicate=_fraction(
            value.get("near_dup_threshold", base.near_duplicate), "near_dup_threshold", 0.5
        ),
        over_fetch=validate.bounded_int(
            value.get("over_fetch", base.over_fetch), field="over_fetch", low=1, high=10
        ),
        max_pool=validate.bounded_int(
            value.get("max_pool", base.max_pool), field="max_pool", low=1, high=100
        ),
    )


def _fraction(value: object, name: str, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= 1:
        raise InvalidInput(
            f"diversity.{name} must be a number from {low} to 1", code="invalid_diversity"
        )
    return float(value)


class _Done:
    """A call run on this thread, answering like a pool's future (its result or its error)."""

    @staticmethod
    def run(call: Callable[..., RecallResult], *args: Any) -> Future[RecallResult]:
        done: Future[RecallResult] = Future()
        try:
            done.set_result(call(*args))
        except BaseException as exc:  # handed to whoever reads the result, as a pool would
            done.set_exception(exc)
        return done
