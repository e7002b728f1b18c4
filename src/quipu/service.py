"""The use cases every surface calls: remember, recall, get, list, history, revise, supersede,
forget, export and import. Synchronous and thread-safe; the HTTP and MCP surfaces call it from
a worker pool. Identity always comes from the :class:`Principal`, never from arguments.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from quipu.auth.ratelimit import RateLimiter, SharedRateLimiter
from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.query import Candidate, Cursor, Filters, Hit, Page, RecallResult
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Principal,
    Provenance,
    Relation,
    Role,
    Scope,
    ScopeRef,
    Source,
    Status,
    Trust,
    WriteResult,
)
from quipu.core.scopes import check_write, parse_scope, resolve_scope
from quipu.core.text import content_hash, embedding_key, fold
from quipu.core.versions import Change
from quipu.embeddings.base import Embedder
from quipu.errors import EmbeddingUnavailable, Forbidden, InvalidInput, NotFound
from quipu.retrieval import focus
from quipu.retrieval.fusion import rrf, score_fusion, session_aggregate
from quipu.retrieval.rerank import CrossEncoder, rerank_sessions
from quipu.retrieval.temporal import query_windows, window_filters
from quipu.retrieval.vectors import toward
from quipu.safety import find_secrets, looks_like_injection, secret_error
from quipu.settings import Settings
from quipu.storage.base import EmbeddingPin, SearchInfo, Store, Vector

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
_UNVERIFIED_SOURCES = frozenset({Source.EXTRACTED, Source.HARVESTED})


@dataclass(frozen=True)
class Limits:
    """The bounds the service enforces, taken from settings by the composition root."""

    max_text_bytes: int = 16_384
    max_metadata_bytes: int = 16_384
    max_tags: int = 32
    max_aliases: int = 32
    max_query_chars: int = 500
    quota_per_owner: int = 10_000
    default_k: int = 10
    max_k: int = 100
    max_page: int = 200
    candidate_depth: int = 100
    rrf_k: int = 60
    weight_vector: float = 0.7
    weight_text: float = 0.3
    fusion: str = "score"
    temporal_boost: float = 0.2
    session_weight: float = 1.0
    feedback_weight: float = 0.5
    query_expansion: float = 0.0
    focus_weight: float = 2.0
    focus_share: float = 0.4
    reranker: str = ""  # the setting, reported by benchmarks; the model is passed apart
    rerank_sessions: int = 10
    rerank_turns: int = 5
    rerank_weight: float = 2.0
    recall_concurrency: int | None = None  # None: no bound

    @classmethod
    def from_settings(cls, s: Settings, *, cpus: int = 1, embedded: bool = True) -> Limits:
        """``cpus``: this machine's processor count; ``embedded``: the store searches in this
        process (SQLite). Both set ``recall_concurrency`` when the setting is empty: an
        embedded recall is all CPU, so one per core of each worker process; a PostgreSQL
        recall mostly waits for the database, so no bound beyond its connection pool."""
        values = {name: getattr(s, name) for name in cls.__dataclass_fields__}
        if s.recall_concurrency is None and embedded:
            # ``workers`` is resolved by `quipu serve`; anywhere else this is one process.
            values["recall_concurrency"] = max(1, cpus // (s.workers or 1))
        return cls(**values)


class MemoryService:
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
        self.limiter = limiter
        self._clock = clock or (lambda: datetime.now(UTC))
        if embedder is not None:
            store.pin_embedding(EmbeddingPin(embedder.model_id, embedder.dimension))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        slots = self.limits.recall_concurrency
        self._recall_slots: AbstractContextManager[Any] = (
            threading.BoundedSemaphore(slots) if slots is not None else nullcontext()
        )

    def _search_pool(self) -> ThreadPoolExecutor:
        """Threads for the keyword search of concurrent recalls, started on first use."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(_SEARCH_THREADS, "quipu-search")
        return self._pool

    def close(self) -> None:
        """Stop the search threads (the store is closed by its owner)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

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
        defer_embedding: bool = False,
    ) -> WriteResult:
        """Store a new memory, or report the live exact duplicate (MEM-6)."""
        lim = self.limits
        body = validate.text(text, max_bytes=lim.max_text_bytes)
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        self._admit_write(principal)
        source_v = validate.enum(Source, source, field="source")
        tags_v = validate.labels(tags, field="tags", max_count=lim.max_tags)
        aliases_v = validate.labels(aliases, field="aliases", max_count=lim.max_aliases)
        meta_v = validate.metadata(metadata, max_bytes=lim.max_metadata_bytes)
        self._refuse_secrets(body, tags_v, aliases_v, meta_v)
        now = self._clock()
        valid = validate.instant(valid_at, field="valid_at") or now
        invalid = validate.instant(invalid_at, field="invalid_at")
        if invalid is not None and invalid <= valid:
            raise InvalidInput("invalid_at must be later than valid_at", code="invalid_time")
        quote_v = (
            None
            if quote is None
            else validate.text(quote, max_bytes=lim.max_text_bytes, field="quote")
        )
        provenance = Provenance(
            surface=principal.surface,
            key_id=principal.key_id,
            session_id=validate.optional_id(session_id, field="session_id"),
            run_id=validate.optional_id(run_id, field="run_id"),
            agent_id=principal.agent_id,
            model=validate.optional_id(model, field="model"),
            prompt_version=validate.optional_id(prompt_version, field="prompt_version"),
            quote=quote_v,
        )
        status = Status.QUARANTINED if looks_like_injection(body) else Status.ACTIVE
        memory = MemoryVersion(
            id=uuid.uuid4().hex,
            version=1,
            tenant_id=ref.tenant_id,
            scope=ref.scope,
            owner=ref.owner,
            project=validate.optional_id(project, field="project"),
            text=body,
            kind=validate.enum(Kind, kind, field="kind"),
            status=status,
            confidence=validate.confidence(confidence),
            source=source_v,
            trust=Trust.UNVERIFIED if source_v in _UNVERIFIED_SOURCES else Trust.VERIFIED,
            tags=tags_v,
            metadata=meta_v,
            aliases=aliases_v,
            provenance=provenance,
            observed_at=validate.instant(observed_at, field="observed_at"),
            valid_at=valid,
            invalid_at=invalid,
            recorded_at=now,
            content_hash=content_hash(body),
            embedding_model=None,
            relation=Relation.CREATED,
            actor=principal.key_id,
        )
        existing = self._live_duplicate(ref, memory)
        if existing is not None:
            return WriteResult(existing, created=False)
        vector = None if defer_embedding else self._embed_for_write(ref.tenant_id, body)
        if vector is not None and self.embedder is not None:
            memory = _with_model(memory, self.embedder.model_id)
        return self.store.insert(
            ref,
            memory,
            vector,
            embedding_key(body) if vector is not None else None,
            lim.quota_per_owner,
        )

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
        body = validate.text(text, max_bytes=self.limits.max_text_bytes)
        self._refuse_secrets(body, (), (), {})
        ref = self._authorise(principal, memory_id, scope, write=True)
        self._admit_write(principal)
        vector = self._embed_for_write(ref.tenant_id, body)
        change = Change(
            actor=principal.key_id,
            relation=Relation.REVISES,
            reason=_reason(reason),
            text=body,
            valid_at=validate.instant(valid_at, field="valid_at"),
            status=Status.QUARANTINED if looks_like_injection(body) else None,
            embedding_model=self.embedder.model_id
            if vector is not None and self.embedder
            else None,
        )
        return self.store.append(
            ref,
            memory_id,
            change,
            expected_version,
            vector,
            embedding_key(body) if vector is not None else None,
            self._clock(),
            self.limits.quota_per_owner,
        )

    def supersede(
        self,
        principal: Principal,
        old_id: str,
        new_id: str,
        *,
        reason: object = None,
        scope: str | None = None,
    ) -> MemoryVersion:
        """Link ``old_id`` to its replacement and end its validity now (MEM-4)."""
        ref = self._authorise(principal, old_id, scope, write=True)
        self._admit_write(principal)
        if old_id == new_id:
            raise InvalidInput("a memory cannot supersede itself", code="invalid_supersede")
        change = Change(
            actor=principal.key_id, relation=Relation.SUPERSEDED_BY, reason=_reason(reason)
        )
        return self.store.supersede(ref, old_id, new_id, change, self._clock())

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
        """Move a memory through the lifecycle (LIFE-1); illegal moves are 409."""
        target = validate.enum(Status, status, field="status")
        ref = self._authorise(principal, memory_id, scope, write=True)
        self._admit_write(principal)
        return self._move(principal, ref, memory_id, target, reason, expected_version, relation)

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
            actor=principal.key_id, relation=relation, reason=_reason(reason), status=target
        )
        if target is Status.EXPIRED:
            change = Change(
                actor=principal.key_id,
                relation=relation,
                reason=_reason(reason),
                status=target,
                invalid_at=self._clock(),
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
        )

    # -- reads -------------------------------------------------------------------------------
    def get(
        self, principal: Principal, memory_id: str, *, scope: str | None = None
    ) -> MemoryVersion:
        ref = self._authorise(principal, memory_id, scope)
        memory = self.store.get(ref, memory_id)
        if memory is None or memory.status in (Status.UNAVAILABLE, Status.QUARANTINED):
            raise _not_found(memory_id)
        return memory

    def history(
        self, principal: Principal, memory_id: str, *, scope: str | None = None
    ) -> list[MemoryVersion]:
        """Every version, forgotten ones included, to the scope's owner (LIFE-7)."""
        ref = self._authorise(principal, memory_id, scope)
        versions = self.store.history(ref, memory_id)
        if not versions:
            raise _not_found(memory_id)
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
        """Hybrid recall in one scope (RECALL-1..5, RECALL-7, RECALL-8).

        At most ``recall_concurrency`` run at once; the rest wait here. Measured on 2 cores,
        `quipu serve --workers 2`, 8 concurrent clients: one recall per process at a time gave
        239-266 requests/s at p95 39-51 ms, no bound ~220 at p95 ~60 ms (docs/benchmarks.md).
        """
        started = time.perf_counter()
        with self._recall_slots:
            return self._recall(principal, query, started, scope, k, planes, filters)

    def _recall(
        self,
        principal: Principal,
        query: object,
        started: float,
        scope: str,
        k: int | None,
        planes: Sequence[str] | None,
        filters: dict[str, Any],
    ) -> RecallResult:
        text = validate.query(query, max_chars=self.limits.max_query_chars)
        size = validate.bounded_int(
            self.limits.default_k if k is None else k, field="k", low=1, high=self.limits.max_k
        )
        ref = resolve_scope(principal, scope)
        flt = self._filters(**filters)
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
            lists["semantic"], info = self.store.vector_candidates(ref, vector, flt, depth)
            paths["semantic"] = info.path
            cache.learn(info)
        timings["vector_ms"] = _ms(mark)
        (lists["text"], info), timings["text_ms"] = keyword.result()
        paths["text"] = info.path
        cache.learn(info)

        top_semantic = lists.get("semantic", [])[:1]
        mark = time.perf_counter()
        exact = self.store.exact_candidates(ref, fold(text), content_hash(text))
        fused = self._fuse(ref, text, vector, flt, depth, lists, cache)
        timings["fuse_ms"] = _ms(mark)
        if vector is not None and self.limits.feedback_weight > 0 and self.limits.fusion != "rrf":
            mark = time.perf_counter()
            top = self.store.vectors_of(ref, [key for key, _, _ in fused[:_FEEDBACK_DEPTH]])
            second = self._feedback_vector(vector, fused, top)
            if second is not None:
                pool = list(dict.fromkeys(c.key for found in lists.values() for c in found))
                near = self.store.similarities(ref, pool, second)
                lists["semantic"] = _ranked(near, depth)
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

        if (
            any(label in ("alias", "text") for h in hits for label in h.matched if h.rank <= 3)
            and exact
        ):
            safety = "exists"
        elif top_semantic and top_semantic[0].score >= PROBABLE_DUPLICATE:
            safety = "probable"
        else:
            safety = "unknown"
        wanted = set(planes or ["facts"])
        meta = {
            "total": len(hits),
            "limit": size,
            "fallback": fallback,
            "reason": reason,
            "underfilled": len(hits) < size,
            "sources_applied": wanted <= self.store.capabilities.sources,
            "create_safety": safety,
            "reranked": reranked,
            "paths": paths,
            "scope": ref.scope.value,
            "timings": {name: round(value, 3) for name, value in timings.items()},
        }
        return RecallResult(hits, meta)

    # -- transfer ----------------------------------------------------------------------------
    def export(self, principal: Principal) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        """Every version of the principal's tenant, with vectors (lossless; API-4)."""
        return self.store.export_versions(principal.tenant_id)

    def import_(
        self, principal: Principal, items: Iterable[tuple[MemoryVersion, Vector | None]]
    ) -> int:
        """Insert exported versions into the principal's tenant, keeping ids and times."""
        pin = self.store.embedding_pin()

        def checked() -> Iterator[tuple[MemoryVersion, Vector | None]]:
            for row, row_vector in items:
                memory, vector = row, row_vector
                if memory.tenant_id != principal.tenant_id:
                    raise InvalidInput(
                        "an import holds rows of another tenant",
                        code="tenant_mismatch",
                        details={"id": memory.id},
                    )
                if vector is not None and (
                    pin is None
                    or memory.embedding_model != pin.model_id
                    or vector.shape[0] != pin.dimension
                ):
                    vector = None
                    memory = _with_model(memory, None)
                yield memory, vector

        count = self.store.import_versions(checked())
        self._audit(principal, "memory.import", (), details={"versions": count})
        return count

    # -- oversight and audit (SCOPE-8, SAFE-4) -----------------------------------------------
    def oversight_list(
        self,
        principal: Principal,
        *,
        scope: str,
        owner: object,
        cursor: str | None = None,
        limit: int | None = None,
        **filters: Any,
    ) -> Page:
        """A superadmin lists any subject's memories in the tenant it names; audited."""
        ref = self._oversight_ref(principal, scope, owner)
        size = validate.bounded_int(
            self.limits.max_page if limit is None else limit,
            field="limit",
            low=1,
            high=self.limits.max_page,
        )
        at = None if cursor is None else Cursor.decode(cursor)
        page = self.store.list_page(ref, self._filters(**filters), at, size)
        self._audit(
            principal,
            "oversight.list",
            tuple(m.id for m in page.items),
            details={"scope": ref.scope.value, "owner": ref.owner},
        )
        return page

    def oversight_forget(
        self, principal: Principal, memory_id: object, *, reason: object = None
    ) -> MemoryVersion:
        """A superadmin forgets any memory of the tenant it names; audited."""
        if principal.role is not Role.SUPERADMIN:
            raise Forbidden("oversight is for superadmins", code="forbidden")
        ident = validate.identifier(memory_id, field="id")
        ref = self.store.locate(principal.tenant_id, ident)
        if ref is None:
            raise _not_found(ident)
        memory = self._move(
            principal, ref, ident, Status.UNAVAILABLE, reason, None, Relation.FORGETS
        )
        self._audit(principal, "oversight.forget", (ident,), reason=_reason(reason))
        return memory

    def audit(
        self, principal: Principal, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        """The tenant's audit log, newest first, for admins (SAFE-4)."""
        if principal.role not in (Role.ADMIN, Role.SUPERADMIN):
            raise Forbidden("the audit log is for admins", code="forbidden")
        size = validate.bounded_int(
            self.limits.max_page if limit is None else limit,
            field="limit",
            low=1,
            high=self.limits.max_page,
        )
        before = None
        if cursor is not None:
            # ASCII digits that fit a 64-bit sequence number (issue 20 defect 9).
            if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18:
                raise InvalidInput(
                    "the cursor is not one this server issued", code="invalid_cursor"
                )
            before = int(cursor)
        events = self.store.list_audit(principal.tenant_id, before, size + 1)
        next_cursor = str(events[size - 1].seq) if len(events) > size else None
        return events[:size], next_cursor

    def _oversight_ref(self, principal: Principal, scope: str, owner: object) -> ScopeRef:
        if principal.role is not Role.SUPERADMIN:
            raise Forbidden("oversight is for superadmins", code="forbidden")
        kind = parse_scope(scope)
        if kind is Scope.GLOBAL:
            return resolve_scope(principal, kind)
        return ScopeRef(principal.tenant_id, kind, validate.identifier(owner, field="owner"))

    def _audit(
        self,
        principal: Principal,
        action: str,
        targets: tuple[str, ...],
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.store.record_audit(
            AuditEvent(
                tenant_id=principal.tenant_id,
                at=self._clock(),
                actor_key=principal.key_id,
                surface=principal.surface,
                action=action,
                target_ids=targets,
                role=principal.role.value,
                agent_id=principal.agent_id,
                user_id=principal.user_id,
                reason=reason,
                details=dict(details or {}),
            )
        )

    def _admit_write(self, principal: Principal) -> None:
        if self.limiter is not None:
            self.limiter.take(principal.key_id)

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
    def _authorise(
        self, principal: Principal, memory_id: object, scope: str | None, *, write: bool = False
    ) -> ScopeRef:
        """The partition of ``memory_id`` if the principal owns it; else 404 (SCOPE-7)."""
        ident = validate.identifier(memory_id, field="id")
        found = self.store.locate(principal.tenant_id, ident)
        if found is None:
            raise _not_found(ident)
        if scope is not None and found.scope.value != scope:
            raise _not_found(ident)
        try:
            mine = resolve_scope(principal, found.scope)
        except InvalidInput:
            raise _not_found(ident) from None
        if mine != found:
            raise _not_found(ident)
        if write:
            check_write(principal, found)
        return found

    def _filters(
        self,
        *,
        as_of: object = None,
        observed_after: object = None,
        observed_before: object = None,
        kinds: object = None,
        tags: object = None,
        sources: object = None,
        min_confidence: object = None,
        project: object = None,
        statuses: object = None,
    ) -> Filters:
        chosen = validate.enums(Status, statuses, field="status") or frozenset({Status.ACTIVE})
        if chosen & {Status.UNAVAILABLE, Status.QUARANTINED}:
            raise InvalidInput(
                "forgotten and quarantined memories are not readable here",
                code="invalid_status",
            )
        return Filters(
            statuses=chosen,
            as_of=validate.instant(as_of, field="as_of"),
            observed_after=validate.instant(observed_after, field="observed_after"),
            observed_before=validate.instant(observed_before, field="observed_before"),
            kinds=validate.enums(Kind, kinds, field="kind"),
            tags=frozenset(validate.labels(tags, field="tags", max_count=self.limits.max_tags)),
            sources=validate.enums(Source, sources, field="source"),
            min_confidence=None if min_confidence is None else validate.confidence(min_confidence),
            project=validate.optional_id(project, field="project"),
        )

    def _shape(
        self,
        exact: list[tuple[int, str]],
        fused: list[tuple[int, float, tuple[str, ...]]],
        flt: Filters,
        size: int,
    ) -> list[Hit]:
        labels: dict[int, list[str]] = {}
        for key, label in exact:
            labels.setdefault(key, []).append(label)
        fused_found = {key: found for key, _, found in fused}
        order: list[tuple[int, float, tuple[str, ...]]] = [
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
            loaded = self.store.load([key for key, _, _ in chunk])
            for key, score, found in chunk:
                memory = loaded.get(key)
                if memory is None or not _shown(memory, flt, now, families):
                    continue
                matched = tuple(labels.get(key, [])) + found
                families.add(memory.id)
                hits.append(Hit(memory, score, len(hits) + 1, matched))
                if len(hits) == size:
                    break
            start += len(chunk)
            window *= 2
        return hits

    def _rerank(
        self,
        ref: ScopeRef,
        text: str,
        fused: list[tuple[int, float, tuple[str, ...]]],
        flt: Filters,
        cache: _RecallCache,
    ) -> tuple[list[tuple[int, float, tuple[str, ...]]], bool]:
        """``fused`` reranked by session with the cross-encoder (``reranker`` setting), and
        whether it was. Only candidates the page may show take part (the filters of
        :meth:`_shape`); a model that fails to run leaves the ranking as it was."""
        assert self.reranker is not None
        pool = [key for key, _, _ in fused[:_RERANK_POOL]]
        loaded = self.store.load(pool)
        now = self._clock()
        usable: dict[int, MemoryVersion] = {}
        families: set[str] = set()
        for key in pool:
            memory = loaded.get(key)
            if memory is not None and _shown(memory, flt, now, families):
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

    def _fuse(
        self,
        ref: ScopeRef,
        text: str,
        vector: Vector | None,
        flt: Filters,
        depth: int,
        lists: dict[str, list[Candidate]],
        cache: _RecallCache,
    ) -> list[tuple[int, float, tuple[str, ...]]]:
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
        if self.limits.session_weight > 0 and fused:
            sessions = self._sessions(ref, [key for key, _, _ in fused], cache)
            fused = session_aggregate(
                fused,
                {key: s for key, s in sessions.items() if s is not None},
                weight=self.limits.session_weight,
            )
        return fused

    def _sessions(
        self, ref: ScopeRef, keys: list[int], cache: _RecallCache
    ) -> dict[int, str | None]:
        """The session of each of ``keys`` (None: written outside one), looked up in the store
        only for keys this recall has not seen yet."""
        seen = cache.sessions
        missing = [key for key in keys if key not in seen]
        if missing:
            found = self.store.sessions_of(ref, missing)
            seen.update((key, found.get(key)) for key in missing)
        return {key: seen[key] for key in keys}

    def _feedback_vector(
        self,
        vector: Vector,
        fused: list[tuple[int, float, tuple[str, ...]]],
        vectors: Mapping[int, Vector],
    ) -> Vector | None:
        """Pseudo-relevance feedback (Rocchio): the query moved toward its top 3 results, so
        the pool's rows near them rise (measured in docs/benchmarks.md). ``None`` when no top
        result has a vector."""
        top = [vectors[key] for key, _, _ in fused[:_FEEDBACK_DEPTH] if key in vectors]
        if not top:
            return None
        return toward(vector, np.mean(top, axis=0), self.limits.feedback_weight)

    def _text_candidates(
        self, ref: ScopeRef, text: str, flt: Filters, depth: int
    ) -> tuple[list[Candidate], SearchInfo]:
        """The store's keyword search with this service's ``query_expansion``."""
        return self.store.text_candidates(
            ref, text, flt, depth, expansion=self.limits.query_expansion
        )

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
                inside += self.store.vector_candidates(ref, vector, narrowed, depth)[0]
            boosts.update((c.key, boost) for c in inside if c.key in pool)
        return boosts

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

    def _embed_for_write(self, tenant_id: str, body: str) -> Vector | None:
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

    def _focused(self, ref: ScopeRef, text: str, timings: dict[str, float]) -> str | None:
        """The query without the words most of the scope's memories hold
        (:mod:`quipu.retrieval.focus`); ``None`` when no word is that common, or
        ``focus_weight`` is 0, or there is no embedder."""
        if self.limits.focus_weight <= 0 or self.embedder is None:
            return None
        mark = time.perf_counter()
        keys = [key for _, key in focus.word_keys(text) if key is not None]
        rows, frequencies = self.store.key_frequencies(ref, keys) if keys else (0, {})
        timings["focus_ms"] = _ms(mark)
        return focus.focused_query(text, rows, frequencies, share=self.limits.focus_share)

    def _refuse_secrets(
        self,
        body: str,
        tags: tuple[str, ...],
        aliases: tuple[str, ...],
        metadata: dict[str, Any],
    ) -> None:
        """SAFE-1 on every field a caller writes; the error names kind and span, not the value."""
        fields: list[tuple[str, str]] = [("text", body)]
        fields += [("tags", t) for t in tags] + [("aliases", a) for a in aliases]
        if metadata:
            fields.append(("metadata", _flatten(metadata)))
        for name, value in fields:
            findings = find_secrets(value)
            if findings:
                error = secret_error(findings)
                error.details["field"] = name
                raise error

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
        size = validate.bounded_int(
            self.limits.max_page if limit is None else limit,
            field="limit",
            low=1,
            high=self.limits.max_page,
        )
        at = None if cursor is None else Cursor.decode(cursor)
        return self.store.list_page(ref, self._filters(**filters), at, size)


def _flatten(value: Any) -> str:
    if isinstance(value, dict):
        return "\n".join(f"{k}={_flatten(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(_flatten(v) for v in value)
    return str(value)


def _shown(memory: MemoryVersion, flt: Filters, now: datetime, families: set[str]) -> bool:
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


def _with_model(memory: MemoryVersion, model: str | None) -> MemoryVersion:
    from dataclasses import replace

    return replace(memory, embedding_model=model)


def _reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 1000 or "\x00" in value:
        raise InvalidInput(
            "reason must be a string of at most 1000 characters", code="invalid_reason"
        )
    return value


def _not_found(memory_id: str) -> NotFound:
    return NotFound(f"no memory {memory_id}", details={"id": memory_id})


@dataclass
class _RecallCache:
    """Lookups of one recall that its feedback pass would otherwise repeat."""

    sessions: dict[int, str | None] = field(default_factory=dict)
    """Session id of each candidate looked up (None: written outside a session)."""
    keyword_inside: dict[int, list[Candidate]] = field(default_factory=dict)
    """Keyword candidates inside each date window the query names, by window."""

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
