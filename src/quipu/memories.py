"""The memory use cases every surface calls: remember, recall, get, list, history, revise,
supersede, forget, status moves, export and import. Synchronous and thread-safe; the HTTP and
MCP surfaces call it from a worker pool. Identity always comes from the :class:`Principal`,
never from arguments; authorisation, screening and audit come from the shared
:class:`~quipu.guard.Guard`, and recall runs the :mod:`quipu.retrieval.pipeline`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from quipu.auth.ratelimit import RateLimiter, SharedRateLimiter
from quipu.core import planes as plane_rules
from quipu.core import validate
from quipu.core.auth import Actor
from quipu.core.graph import GraphDraft, GraphSink, MirrorMode, PlacementSink
from quipu.core.knowledge import BodyWriter
from quipu.core.limits import Limits
from quipu.core.query import Cursor, Page, RecallResult
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Relation,
    ScopeRef,
    Status,
    TurnRef,
    WriteResult,
)
from quipu.core.scopes import check_write, resolve_scope
from quipu.core.text import embedding_key, fold
from quipu.core.versions import UNSET, Change
from quipu.corroboration import corroborate, corroborate_near
from quipu.embeddings.base import Embedder, Vectors
from quipu.errors import EmbeddingUnavailable, InvalidInput, QuipuError
from quipu.guard import Guard, not_found
from quipu.guard import reason as _reason
from quipu.memory_draft import LONG_TEXT, MemoryDraft, draft
from quipu.retrieval.pipeline import RecallPipeline, RecallQuery
from quipu.retrieval.rerank import CrossEncoder
from quipu.storage.admission import verdicts
from quipu.storage.base import EmbeddingPin, Store, Vector

#: The parameters of :meth:`MemoryService.remember` that are a new memory's fields.
_DRAFT_FIELDS = frozenset(f.name for f in fields(MemoryDraft))


class UsageSink(Protocol):
    """Takes each recall's hits off the request path (RECALL-6): ``offer`` must not block."""

    def offer(self, tenant_id: str, query: str, result: RecallResult) -> None: ...

    def close(self) -> None: ...


class MemoryService:
    """The memory plane's use cases over one store."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        limits: Limits | None = None,
        clock: Callable[[], datetime] | None = None,
        limiter: RateLimiter | SharedRateLimiter | None = None,
        reranker: CrossEncoder | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.limits = limits or Limits()
        self._clock = clock or (lambda: datetime.now(UTC))
        if embedder is not None:
            store.pin_embedding(EmbeddingPin(embedder.model_id, embedder.dimension))
        self.guard = Guard(store, self.limits, self._clock, limiter)
        self.pipeline = RecallPipeline(store, embedder, self.limits, self._clock, reranker)
        #: Where recall hits go as usage events (RECALL-6): :class:`quipu.usage.UsageRecorder`,
        #: set by the composition root; None records nothing.
        self.usage: UsageSink | None = None
        self.graph: GraphSink | None = None  # GRAPH-1: set by the composition root
        self.placement: PlacementSink | None = None  # GRAPH-2: set by the composition root
        #: Writes graduated articles' bodies as review candidates (GRAD-1): set by the
        #: composition root when a chat model is configured; None keeps the memory's text.
        self.body_writer: BodyWriter | None = None
        #: Embeds a bulk write's texts while its graph rows are drafted (issue 23); its threads
        #: start on the first such write and are shared by this service's job view.
        self._embedders = ThreadPoolExecutor(8, thread_name_prefix="quipu-write-embed")

    @property
    def limiter(self) -> RateLimiter | SharedRateLimiter | None:
        """The write rate limit (the guard's); `quipu serve --auth` sets it after building."""
        return self.guard.limiter

    @limiter.setter
    def limiter(self, value: RateLimiter | SharedRateLimiter | None) -> None:
        self.guard.limiter = value

    def close(self) -> None:
        """Stop the recall pipeline's search threads and the usage recorder (the store is
        closed by its owner)."""
        self.pipeline.close()
        self._embedders.shutdown(wait=True)
        if self.usage is not None:
            self.usage.close()
        if self.body_writer is not None:
            self.body_writer.close()

    def for_jobs(self) -> MemoryService:
        """This service as background jobs write through it: the same store, models and guard,
        but no per-key request rate limit. A job's writes are not a caller's requests, so they
        never spend (or fail on) a caller's budget (issue 20, #6); the owner quota and each
        job's own caps still bound them."""
        view = copy.copy(self)
        view.guard = copy.copy(self.guard)
        view.guard.limiter = None
        return view

    # -- writes ------------------------------------------------------------------------------
    def remember(
        self,
        principal: Principal,
        text: object,
        *,
        scope: str = "agent",
        kind: object = "fact",
        tags: object = None,
        metadata: object = None,
        aliases: object = None,
        project: object = None,
        confidence: object = 1.0,
        source: object = "explicit",
        observed_at: object = None,
        valid_at: object = None,
        invalid_at: object = None,
        session_id: object = None,
        run_id: object = None,
        model: object = None,
        prompt_version: object = None,
        quote: object = None,
        quote_start: object = None,
        quote_end: object = None,
        status: object = None,
        defer_embedding: bool = False,
        turn: TurnRef | None = None,
    ) -> WriteResult:
        """Store a new memory, or report the live exact duplicate (MEM-6).

        ``status`` ``candidate`` stores a proposal that only a reviewer activates (LIFE-5);
        model output is always written so. ``project`` must be registered (SCOPE-6)."""
        lim = self.limits
        given = {k: v for k, v in locals().items() if k in _DRAFT_FIELDS}
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        with verdicts():  # each record walked and screened once, here and in the store
            model = None if defer_embedding or self.embedder is None else self.embedder.model_id
            memory = draft(
                self.guard,
                lim,
                self._clock(),
                principal,
                ref,
                MemoryDraft(**given),
                embedding_model=model,
            )
            return self._remember(principal, ref, memory, defer_embedding=defer_embedding)

    def _remember(
        self,
        principal: Principal,
        ref: ScopeRef,
        memory: MemoryVersion,
        *,
        defer_embedding: bool,
    ) -> WriteResult:
        """Store the drafted ``memory`` (see :meth:`remember`)."""
        lim, body = self.limits, memory.text
        existing = self._live_duplicate(ref, memory)
        if existing is not None:
            return WriteResult(self._corroborated(principal, ref, existing, memory), created=False)
        # One text: embedded on this thread. On a helper thread, beside the duplicate read and
        # the graph draft, it cost 5-10 % more CPU per turn and gained nothing at load 10-15.
        vector = None if defer_embedding else self.embed_for_write(ref.tenant_id, body)
        if vector is None and memory.embedding_model is not None:
            memory = replace(memory, embedding_model=None)  # embedded later by embed_pending
        key = embedding_key(body) if vector is not None else None
        by = Actor.of(principal)
        placing = self.placement  # GRAPH-2: where the tenant's ontology places the memory
        placed = None if placing is None else placing.write(principal, ref, memory, vector, key, by)
        if placed is None:  # GRAPH-1: its entities and facts, no model call
            graph = self.graph_draft("new", body)
            written = self.store.insert(
                ref, memory, vector, key, lim.quota_per_owner, by=by, graph=graph
            )  # the memory and its graph rows in one transaction
        else:
            ref, written = placed
        if written.created:  # a near duplicate it restates is corroborated (CONSOL-3)
            latest = corroborate_near(
                self.store, self._clock, lim.quota_per_owner, principal, ref, written, vector
            )
            return WriteResult(latest, created=True)
        return written

    def revise(
        self,
        principal: Principal,
        memory_id: str,
        text: object,
        *,
        expected_version: int | None = None,
        reason: object = None,
        scope: str | None = None,
        valid_at: object = None,
    ) -> MemoryVersion:
        """Write a new version with new text (MEM-4, LIFE-2)."""
        body = validate.text(text, max_bytes=self.limits.max_text_bytes, instead=LONG_TEXT)
        change = Change(
            actor=principal.key_id,
            relation=Relation.REVISES,
            reason=_reason(reason),
            text=body,
            valid_at=validate.instant(valid_at, field="valid_at"),
        )
        self.guard.screen(change)  # before any embedding is spent (or a secret sent out)
        ref = self.guard.authorise(principal, memory_id, scope, write=True)
        self.guard.admit_write(principal)
        vector = self.embed_for_write(ref.tenant_id, body)
        change = replace(
            change,
            status=Status.QUARANTINED if self.guard.injected(change) else None,
            embedding_model=self.embedder.model_id
            if vector is not None and self.embedder
            else None,
        )
        write = partial(
            self.store.append,
            ref,
            memory_id,
            change,
            expected_version,
            vector,
            embedding_key(body) if vector is not None else None,
            self._clock(),
            self.limits.quota_per_owner,
            by=Actor.of(principal),
            graph=self.graph_draft("replace", body),
        )
        placing = self.placement  # GRAPH-2: a placed memory's revision is checked again
        placed = None if placing is None else placing.revise(principal, ref, memory_id, body, write)
        return write() if placed is None else placed

    def graph_draft(self, mode: MirrorMode, text: str | None = None) -> GraphDraft | None:
        """The graph mirror a store writes with a version (GRAPH-1; None: the graph is off)."""
        return None if self.graph is None else self.graph.draft(mode, text)

    def supersede(
        self,
        principal: Principal,
        old_id: str,
        new_id: str,
        *,
        reason: object = None,
        scope: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Link ``old_id`` to its replacement and end its validity now (MEM-4); with
        ``expected_version``, only if ``old_id`` is still at that version (LIFE-2)."""
        ref = self.guard.authorise(principal, old_id, scope, write=True)
        self.guard.admit_write(principal)
        if old_id == new_id:
            raise InvalidInput("a memory cannot supersede itself", code="invalid_supersede")
        change = Change(
            actor=principal.key_id, relation=Relation.SUPERSEDED_BY, reason=_reason(reason)
        )
        self.guard.screen(change)
        return self.store.supersede(
            ref, old_id, new_id, change, self._clock(), expected_version, by=Actor.of(principal)
        )

    def forget(
        self,
        principal: Principal,
        memory_id: str,
        *,
        reason: object = None,
        expected_version: int | None = None,
        scope: str | None = None,
    ) -> MemoryVersion:
        """Logical delete: append an ``unavailable`` version (LIFE-3)."""
        return self.set_status(
            principal,
            memory_id,
            Status.UNAVAILABLE,
            reason=reason,
            expected_version=expected_version,
            scope=scope,
            relation=Relation.FORGETS,
        )

    def set_status(
        self,
        principal: Principal,
        memory_id: str,
        status: object,
        *,
        reason: object = None,
        expected_version: int | None = None,
        scope: str | None = None,
        relation: Relation = Relation.STATUS,
    ) -> MemoryVersion:
        """Move a memory through the lifecycle (LIFE-1); illegal moves are 409.

        Leaving ``candidate``, ``quarantined`` or ``rejected`` (for anything but forgotten), and
        rejecting, are reviews (LIFE-5, LIFE-6, issue 20 defect 5): they need a reviewer who did
        not write that version (:meth:`~quipu.guard.Guard.review`) and a reason, apply only to
        the version the reviewer saw, and are audited as ``memory.review``."""
        target = validate.enum(Status, status, field="status")
        ref = self.guard.authorise(principal, memory_id, scope, write=True)
        self.guard.admit_write(principal)
        current = self.store.get(ref, memory_id)
        if current is None:
            raise not_found(memory_id)
        why = self.guard.review(principal, ref, current, target, reason)
        if why is None:
            return self._move(principal, ref, memory_id, target, reason, expected_version, relation)
        return self.reviewed_move(principal, ref, current, target, why, expected_version)

    def reviewed_move(
        self,
        principal: Principal,
        ref: ScopeRef,
        current: MemoryVersion,
        target: Status,
        why: str,
        expected_version: int | None,
    ) -> MemoryVersion:
        """A move :meth:`Guard.review` allowed: on the version the reviewer saw, audited."""
        expected = current.version if expected_version is None else expected_version
        moved = self._move(principal, ref, current.id, target, why, expected, Relation.REVIEWS)
        self.guard.audit(
            principal,
            "memory.review",
            (current.id,),
            reason=why,
            details={"from": current.status.value, "to": target.value, "version": moved.version},
        )
        return moved

    def _move(
        self,
        principal: Principal,
        ref: ScopeRef,
        memory_id: str,
        target: Status,
        reason: object,
        expected_version: int | None,
        relation: Relation,
    ) -> MemoryVersion:
        change = Change(
            actor=principal.key_id,
            relation=relation,
            reason=_reason(reason),
            status=target,
            invalid_at=self._clock() if target is Status.EXPIRED else UNSET,
        )
        return self.store.append(
            ref,
            memory_id,
            change,
            expected_version,
            None,
            None,
            self._clock(),
            self.limits.quota_per_owner,
            by=Actor.of(principal),
            graph=self.graph_draft("fill") if target is Status.ACTIVE else None,  # GRAPH-1
        )

    # -- reads -------------------------------------------------------------------------------
    def get(
        self, principal: Principal, memory_id: str, *, scope: str | None = None
    ) -> MemoryVersion:
        ref = self.guard.authorise(principal, memory_id, scope)
        memory = self.store.get(ref, memory_id)
        if memory is None or memory.status in (
            Status.UNAVAILABLE,
            Status.QUARANTINED,
            Status.ERASED,
        ):
            raise not_found(memory_id)
        return memory

    def history(
        self, principal: Principal, memory_id: str, *, scope: str | None = None
    ) -> list[MemoryVersion]:
        """Every version, forgotten ones included, to the scope's owner (LIFE-7)."""
        ref = self.guard.authorise(principal, memory_id, scope)
        versions = self.store.history(ref, memory_id)
        if not versions:
            raise not_found(memory_id)
        return versions

    def recall(
        self,
        principal: Principal,
        query: object,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
        **filters: Any,
    ) -> RecallResult:
        """Hybrid recall in one scope (RECALL-1..5, RECALL-7, RECALL-8): the query and the
        filters are validated, the scope resolved from the principal, then the recall pipeline
        runs (at most ``recall_concurrency`` at once; the rest wait there)."""
        started = time.perf_counter()
        text = validate.query(query, max_chars=self.limits.max_query_chars)
        size = validate.bounded_int(
            self.limits.default_k if k is None else k, field="k", low=1, high=self.limits.max_k
        )
        ref = resolve_scope(principal, scope)
        chosen = plane_rules.parse(planes, default=plane_rules.RECALL_DEFAULT)
        flt = self.guard.filters(**filters)
        sources = self.store.capabilities.sources
        kinds = plane_rules.memory_kinds(chosen, flt.kinds)
        if kinds is None:  # no memory plane chosen: recall reads nothing (use search)
            result = RecallResult([], {"total": 0, "limit": size, "scope": ref.scope.value})
        else:
            request = RecallQuery(
                text=text,
                ref=ref,
                filters=replace(flt, kinds=kinds),
                size=size,
                planes=chosen,
                sources=sources,
            )
            result = self.pipeline.recall(request, started)
        # RECALL-8: recall serves the memory planes; a plane it cannot serve is named.
        unserved = sorted(chosen - (sources & plane_rules.MEMORY_PLANES))
        result.meta.update(
            planes=sorted(chosen - set(unserved)),
            sources_applied=not unserved,
            unserved_planes=unserved,
        )
        if self.usage is not None and result.results:
            self.usage.offer(ref.tenant_id, text, result)  # RECALL-6; never blocks
        return result

    # -- transfer ----------------------------------------------------------------------------
    def export(self, principal: Principal) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        """Every version of the principal's tenant, with vectors (lossless; API-4)."""
        return self.store.export_versions(principal.tenant_id)

    def import_(
        self,
        principal: Principal,
        items: Iterable[tuple[MemoryVersion, Vector | None]],
        *,
        on_refused: Callable[[int, str, QuipuError], None] | None = None,
    ) -> int:
        """Insert exported versions into the principal's tenant, keeping ids and times.

        An export is data from outside: every version is screened like any write (issue 20
        defect 11): a version that cannot be stored or holds a secret refuses its whole family
        (the versions of one memory travel together), and a current version that looks like a
        prompt injection is stored ``quarantined``. Without ``on_refused`` the first refusal
        raises and nothing is written; with it, refused families are left out and each of their
        rows is reported as ``on_refused(position, memory_id, error)``, ``position`` counting
        ``items`` from 1."""
        pin = self.store.embedding_pin()
        families: dict[str, list[tuple[int, MemoryVersion, Vector | None]]] = {}
        refused: dict[str, QuipuError] = {}
        for position, (row, row_vector) in enumerate(items, start=1):
            memory, vector = self._imported(principal, row), row_vector
            if vector is not None and (
                pin is None
                or memory.embedding_model != pin.model_id
                or vector.shape[0] != pin.dimension
            ):
                vector = None
                memory = replace(memory, embedding_model=None)
            families.setdefault(memory.id, []).append((position, memory, vector))
            if memory.id in refused:
                continue
            try:
                self.guard.screen(memory)
            except QuipuError as exc:
                if on_refused is None:
                    raise
                refused[memory.id] = exc
        for family, error in refused.items():
            for position, _, _ in families.pop(family):
                assert on_refused is not None
                on_refused(position, family, error)
        # the rows and the graph mirrors of the current active ones commit together (GRAPH-1)
        with self.store.transaction(principal.tenant_id):
            count = self.store.import_versions(
                (memory, vector) for rows in families.values() for _, memory, vector in rows
            )
            if self.graph is not None:  # imported memories feed the graph (idempotent)
                self.graph.imported(m for rows in families.values() for _, m, _ in rows)
        self.guard.audit(
            principal,
            "memory.import",
            (),
            details={"versions": count, "refused_families": len(refused)},
        )
        return count

    def _imported(self, principal: Principal, memory: MemoryVersion) -> MemoryVersion:
        """One exported version, checked to belong to the principal's tenant, quarantined
        when it is current and reads like an injection."""
        if memory.tenant_id != principal.tenant_id:
            raise InvalidInput(
                "an import holds rows of another tenant",
                code="tenant_mismatch",
                details={"id": memory.id},
            )
        if (
            memory.is_current
            and memory.status not in (Status.UNAVAILABLE, Status.QUARANTINED)
            and self.guard.injected(memory)
        ):
            return replace(memory, status=Status.QUARANTINED)
        return memory

    def embed_pending(self, batch: int = 64) -> int:
        """Embed rows stored without a vector (deferred or written while the embedder was down)."""
        if self.embedder is None:
            return 0
        done = 0
        while True:
            rows = self.store.missing_vectors(batch)
            if not rows:
                return done
            vectors = self.embedder.embed_batch([r[2] for r in rows])
            self.store.attach_vectors(
                self.embedder.model_id,
                [(key, embedding_key(text), vectors[i]) for i, (key, _, text) in enumerate(rows)],
            )
            done += len(rows)

    # -- helpers -----------------------------------------------------------------------------
    def _corroborated(
        self, principal: Principal, ref: ScopeRef, existing: MemoryVersion, memory: MemoryVersion
    ) -> MemoryVersion:
        """``existing``, verified when this write corroborates it (:mod:`quipu.corroboration`)."""
        quota = self.limits.quota_per_owner
        return corroborate(self.store, self._clock, quota, principal, ref, existing, memory)

    def _live_duplicate(self, ref: ScopeRef, memory: MemoryVersion) -> MemoryVersion | None:
        if memory.status is not Status.ACTIVE:
            return None
        keys = [
            key
            for key, label in self.store.exact_candidates(
                ref, fold(memory.text), memory.content_hash
            )
            if label == "text"
        ]
        for candidate in self.store.load(keys).values():
            if candidate.project == memory.project and candidate.status is Status.ACTIVE:
                return candidate
        return None

    def embed_later(self, texts: Sequence[str]) -> Callable[[], Vectors | None]:
        """``texts`` embedded for a write on a helper thread while the caller goes on; calling
        the result waits for the vectors (``None``: the embedder is off or failing, and the
        rows are embedded later by embed_pending)."""
        embedder = self.embedder
        if embedder is None:
            return lambda: None
        try:
            running = self._embedders.submit(embedder.embed_batch, list(texts))
        except RuntimeError:  # the service is closed: embed on this thread
            running = None
        if running is None:
            try:
                done = embedder.embed_batch(list(texts))
            except EmbeddingUnavailable:
                return lambda: None
            return lambda: done

        def vectors() -> Vectors | None:
            try:
                return running.result()
            except EmbeddingUnavailable:
                return None

        return vectors

    def embed_for_write(self, tenant_id: str, body: str) -> Vector | None:
        """The vector for ``body``: from the cache when this text was embedded before; ``None``
        when the embedder is off or failing (the row is embedded later by embed_pending)."""
        if self.embedder is None:
            return None
        key = embedding_key(body)
        cached = self.store.cached_embeddings(tenant_id, self.embedder.model_id, [key])
        if key in cached:
            return cached[key]
        try:
            vector: Vector = self.embedder.embed_batch([body])[0]
        except EmbeddingUnavailable:
            return None
        return vector

    # ``list`` last: below it, the name would shadow the builtin in annotations.
    def list(
        self,
        principal: Principal,
        *,
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        **filters: Any,
    ) -> Page:
        ref = resolve_scope(principal, scope)
        size = self.guard.page_size(limit)
        at = None if cursor is None else Cursor.decode(cursor)
        return self.store.list_page(ref, self.guard.filters(**filters), at, size)
