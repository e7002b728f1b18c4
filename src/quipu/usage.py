"""Usage signals and graduation (RECALL-6, GRAD-1): recall hits become immutable usage events,
relevant ones count toward a memory's recall count, and a memory recalled often enough
graduates into a knowledge article through the novelty gate.

- :class:`UsageRecorder` takes each recall's hits on a bounded queue (``offer`` never blocks: a
  full queue drops the recall and counts it) and one daemon thread writes them: an event per
  hit; a hit is *relevant* when the recall was not a keyword-only fallback and the cosine of
  the query and the memory is at least 0.6; a relevant memory's count rises at most once per
  3,600 s, and at most 200 memories per batch.
- :class:`Graduation` graduates one memory on request (``graduate``) or the hot memories of
  every tenant in a sweep (at most 50 per run, scanning at most 500 tenants, round robin).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from quipu.article_candidates import ArticleCandidates
from quipu.core import validate
from quipu.core.knowledge import ArticleWrite, UsageEvent, Verdict
from quipu.core.query import RecallResult
from quipu.core.records import MemoryVersion, Principal, Role, Scope, ScopeRef, Status
from quipu.core.scopes import check_write, resolve_scope
from quipu.core.text import embedding_key
from quipu.embeddings.base import Embedder
from quipu.errors import Conflict, EmbeddingUnavailable, InvalidInput, QuipuError
from quipu.knowledge import KnowledgeService
from quipu.storage.base import Store

log = logging.getLogger("quipu.usage")

#: A hit is relevant from this cosine of query and memory (RECALL-6).
RELEVANT_SIMILARITY = 0.6
#: A memory's count rises at most once per this many seconds.
COOLDOWN_SECONDS = 3600
#: Most memories bumped per written batch.
MAX_BUMPS_PER_BATCH = 200
#: Recalls waiting to be written; more are dropped (and counted).
QUEUE_CAPACITY = 10_000
#: Relevant recalls from which a memory graduates (GRAD-1).
GRADUATION_THRESHOLD = 3
#: Memories one sweep graduates at most, and tenants it scans at most.
MAX_PER_RUN = 50
SCAN_LIMIT = 500
#: Longest graduated title prefix, in characters.
_TITLE_CHARS = 80


@dataclass(frozen=True)
class _Recalled:
    tenant_id: str
    query: str
    fallback: bool
    memories: tuple[MemoryVersion, ...]
    scores: tuple[float, ...]


class UsageRecorder:
    """Usage events off the request path (see the module docstring). Thread-safe."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        *,
        capacity: int = QUEUE_CAPACITY,
        relevant: float = RELEVANT_SIMILARITY,
        cooldown: timedelta = timedelta(seconds=COOLDOWN_SECONDS),
        max_bumps: int = MAX_BUMPS_PER_BATCH,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.relevant = relevant
        self.cooldown = cooldown
        self.max_bumps = max_bumps
        self._clock = clock or (lambda: datetime.now(UTC))
        self._queue: queue.Queue[_Recalled | None] = queue.Queue(capacity)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        """Recalls not recorded because the queue was full."""
        self.failed = 0
        """Batches whose write failed (logged with the error)."""
        self.recorded = 0
        """Usage events written."""

    def offer(self, tenant_id: str, query: str, result: RecallResult) -> None:
        """Queue a recall's hits; never blocks, never raises: a full queue drops them."""
        item = _Recalled(
            tenant_id,
            query,
            bool(result.meta.get("fallback")),
            tuple(h.memory for h in result.results),
            tuple(h.score for h in result.results),
        )
        self._start()
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def flush(self) -> None:
        """Wait until every queued recall is written (tests, shutdown)."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        thread = self._thread
        if thread is None:
            return
        self._queue.put(None)
        thread.join(timeout=30)
        self._thread = None

    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="quipu-usage", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self.write(item)
            except Exception:  # a failed batch is counted and logged; recall never sees it
                with self._lock:
                    self.failed += 1
                log.exception("writing usage events failed")
            finally:
                self._queue.task_done()

    def write(self, item: _Recalled) -> None:
        """One recall's events and bumps (runs on the recorder's thread)."""
        similarity = self._similarities(item)
        now = self._clock()
        recall_id = uuid.uuid4().hex
        events = []
        relevant: list[str] = []
        for memory in item.memories:
            cosine = similarity.get(memory.id)
            hot = not item.fallback and cosine is not None and cosine >= self.relevant
            events.append(
                UsageEvent(
                    item.tenant_id,
                    uuid.uuid4().hex,
                    memory.id,
                    recall_id,
                    float(cosine if cosine is not None else 0.0),
                    hot,
                    now,
                )
            )
            if hot:
                relevant.append(memory.id)
        self.store.usage_record(events)
        if relevant:
            self.store.usage_bump(item.tenant_id, relevant[: self.max_bumps], now, self.cooldown)
        with self._lock:
            self.recorded += len(events)

    def _similarities(self, item: _Recalled) -> dict[str, float]:
        """Cosine of the query and each memory, from the memories' stored vectors; empty on a
        fallback recall (it never bumps) or when the query cannot be embedded."""
        if item.fallback or self.embedder is None:
            return {}
        try:
            query = self.embedder.embed_query(item.query)
        except EmbeddingUnavailable:
            return {}
        keys = {m.id: embedding_key(m.text) for m in item.memories}
        vectors = self.store.cached_embeddings(
            item.tenant_id, self.embedder.model_id, list(keys.values())
        )
        return {
            ident: float(np.dot(vectors[key], query))
            for ident, key in keys.items()
            if key in vectors
        }


@dataclass(frozen=True)
class Graduated:
    """A graduation's answer: the gate's verdict and the article (201 when it is new)."""

    verdict: Verdict
    article: dict[str, Any]
    memory_id: str
    candidate_id: str | None = None
    """A model-written body for the new article, awaiting review (GRAD-1), if one was made."""

    @property
    def created(self) -> bool:
        return self.verdict in (Verdict.CREATED, Verdict.GATED_TO_DRAFT)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "created": self.created,
            "memory_id": self.memory_id,
            "article": self.article,
            "candidate_id": self.candidate_id,
        }


class Graduation:
    """Memories into knowledge articles (GRAD-1) through the novelty gate."""

    def __init__(
        self,
        knowledge: KnowledgeService,
        *,
        threshold: int = GRADUATION_THRESHOLD,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.knowledge = knowledge
        self.store = knowledge.store
        self.threshold = threshold
        self._clock = clock or (lambda: datetime.now(UTC))
        #: Model-written bodies as review candidates, when a model is configured (GRAD-1).
        self.candidates = ArticleCandidates(knowledge, clock=self._clock)

    def graduate(
        self, principal: Principal, memory_id: object, *, re_scope: object = None
    ) -> Graduated:
        """Graduate one of the caller's memories now, whatever its count. The article is an
        ``owner``-visible draft; ``re_scope="tenant"`` (the tenant write grant) makes it a
        published tenant article. A memory graduates once: again is its article (200), but
        re-scoping one graduated without it is 409 ``already_graduated``. 503 and no stamp
        when the novelty gate cannot run."""
        try:
            ident = validate.identifier(memory_id, field="memory_id")
        except InvalidInput:
            raise InvalidInput(
                "memory_id is not a memory id",
                code="invalid_memory_id",
                details={"field": "memory_id"},
            ) from None
        if re_scope not in (None, "tenant"):
            raise InvalidInput(
                're_scope is null or "tenant"',
                code="invalid_re_scope",
                details={"field": "re_scope"},
            )
        wide = re_scope == "tenant"
        if wide:
            check_write(principal, resolve_scope(principal, "tenant"))
        memory = self.knowledge.memories.get(principal, ident)
        return self._graduate(principal, memory, wide)

    def sweep(
        self, *, max_per_run: int = MAX_PER_RUN, scan_limit: int = SCAN_LIMIT
    ) -> dict[str, Any]:
        """Graduate hot memories (``threshold`` relevant recalls or more) of every tenant:
        at most ``max_per_run``, taking turns between at most ``scan_limit`` tenants, never
        re-scoping. Stops at the first gate that cannot run (nothing stamped)."""
        tenants = self.store.hot_tenants(self.threshold, scan_limit)
        report: dict[str, Any] = {
            "tenants": len(tenants),
            "scanned": 0,
            "graduated": 0,
            "deduplicated": 0,
            "skipped": 0,
            "candidates": 0,
            "gate_unavailable": False,
        }
        if not tenants:
            return report
        per_tenant = max(1, math.ceil(2 * max_per_run / len(tenants)))
        queues = {t: self.store.hot_memories(t, self.threshold, per_tenant) for t in tenants}
        report["scanned"] = sum(len(q) for q in queues.values())
        done = 0
        while done < max_per_run and any(queues.values()):
            for tenant in tenants:
                if done >= max_per_run or not queues[tenant]:
                    continue
                memory_id = queues[tenant].pop(0)
                try:
                    outcome, proposed = self._sweep_one(tenant, memory_id)
                except EmbeddingUnavailable:
                    report["gate_unavailable"] = True
                    return report
                except QuipuError as exc:
                    if exc.code == "novelty_gate_unavailable":
                        report["gate_unavailable"] = True
                        return report
                    log.warning("graduating %s failed: %s", memory_id, exc.code)
                    report["skipped"] += 1
                    continue
                report[outcome] += 1
                report["candidates"] += proposed
                done += outcome != "skipped"
        return report

    def _sweep_one(self, tenant_id: str, memory_id: str) -> tuple[str, bool]:
        ref = self.store.locate(tenant_id, memory_id)
        memory = None if ref is None else self.store.get(ref, memory_id)
        if ref is None or memory is None or memory.status is not Status.ACTIVE:
            # forgotten, erased or never live: stamped so it is not scanned again
            self.store.mark_graduated(tenant_id, memory_id, "", self._clock(), False)
            return "skipped", False
        done = self._graduate(_owner_principal(ref), memory, False)
        return "graduated" if done.created else "deduplicated", done.candidate_id is not None

    def _graduate(self, principal: Principal, memory: MemoryVersion, wide: bool) -> Graduated:
        usage = self.store.memory_usage(principal.tenant_id, memory.id)
        if usage is not None and usage.graduated_at is not None:
            return self._again(principal, memory.id, usage.article_id, usage.re_scoped, wide)
        try:
            written: ArticleWrite = self.knowledge.create(
                principal,
                graduated_title(memory),
                memory.text,
                tags=list(memory.tags),
                project=memory.project,
                visibility="tenant" if wide else "owner",
                status="published" if wide else "draft",
                source="graduated",
                memory_id=memory.id,
                owner=memory.owner if memory.scope is Scope.AGENT else None,
            )
        except Conflict as exc:
            if exc.code != "title_taken":
                raise
            raise _already(memory.id) from None  # a concurrent first graduation won
        article = written.article
        if not self.store.mark_graduated(
            principal.tenant_id, memory.id, article.id, self._clock(), wide
        ):
            usage = self.store.memory_usage(principal.tenant_id, memory.id)
            if usage is None or usage.re_scoped != wide:
                raise _already(memory.id)
            return Graduated(Verdict.DEDUPLICATED, article.summary(), memory.id)
        self.knowledge.guard.audit(
            principal,
            "memory.graduate",
            (memory.id, article.id),
            details={"verdict": written.verdict.value, "re_scope": "tenant" if wide else None},
        )
        # the model's body is a review candidate, never the article's (GRAD-1, LIFE-5)
        candidate = self.candidates.propose(principal, article, memory) if written.created else None
        made = None if candidate is None else candidate.id
        return Graduated(written.verdict, article.summary(), memory.id, made)

    def _again(
        self,
        principal: Principal,
        memory_id: str,
        article_id: str | None,
        was_wide: bool,
        wide: bool,
    ) -> Graduated:
        """A memory that graduated before: its article, without running the gate again."""
        if wide and not was_wide:
            raise _already(memory_id)
        found = (
            None if not article_id else self.store.knowledge_get(principal.tenant_id, article_id)
        )
        if found is None:
            raise _already(memory_id)
        return Graduated(Verdict.DEDUPLICATED, found.summary(), memory_id)


def graduated_title(memory: MemoryVersion) -> str:
    """A graduated article's title: the memory's first line, shortened, and its id's first
    eight characters, so two memories never claim one title."""
    first = " ".join(memory.text.split())[:_TITLE_CHARS].rstrip()
    return f"{first} ({memory.id[:8]})"


def _owner_principal(ref: ScopeRef) -> Principal:
    """Whom the sweep acts as for a memory of ``ref``: a service key of its tenant, the
    memory's owner as agent for an agent-scope memory."""
    agent = ref.owner if ref.scope is Scope.AGENT else None
    return Principal(
        ref.tenant_id, "system:graduation", Role.SERVICE, agent_id=agent, surface="worker"
    )


def _already(memory_id: str) -> Conflict:
    return Conflict(
        "this memory has graduated already (a memory graduates once)",
        code="already_graduated",
        details={"memory_id": memory_id},
    )
