"""The knowledge plane's use cases every surface calls (KNOW-1, KNOW-2): create, update, read,
history, search and erase tenant knowledge articles.

Beside :mod:`quipu.memories`, over the same store, embedder and :class:`~quipu.guard.Guard`
(rate limit, secret screen, injection check, audit). Who may do what:

- read (KNOW-1): admins every article of their tenant; an owner its own; ``owner`` visibility
  hides an article from everyone else; agent-role keys read published articles only; users and
  services read drafts too (:func:`quipu.core.knowledge.can_read`);
- create: any key of the tenant; a ``tenant``-visible *published* article needs the tenant
  write grant (an admin or ``tenant:write``, SCOPE-5), anything else is the writer's draft or
  its own article;
- update: the owner, or a tenant writer for a ``tenant``-visible article; publishing to the
  tenant needs the grant as on create; ``expected_version`` is required (LIFE-2);
- erase: an admin or the ``memory:erase`` grant.

Every create and update passes the novelty gate (KNOW-2, :meth:`KnowledgeService._gate`)."""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from quipu.core import validate
from quipu.core.knowledge import (
    MAX_BODY_BYTES,
    MAX_CATEGORY_CHARS,
    MAX_TITLE_CHARS,
    ArticlePage,
    ArticleStatus,
    ArticleSummary,
    ArticleVersion,
    ArticleWrite,
    Verdict,
    Visibility,
    article_tombstone,
    can_read,
    is_admin,
    subject_of,
)
from quipu.core.query import Filters
from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.core.scopes import check_write, resolve_scope
from quipu.embeddings.base import Embedder
from quipu.errors import (
    EmbeddingUnavailable,
    Forbidden,
    InvalidInput,
    NotFound,
    PreconditionRequired,
    Unavailable,
)
from quipu.governance.holds import Reach, erase_path, memory_subjects, under_holds
from quipu.guard import reason as _reason
from quipu.memories import MemoryService
from quipu.retrieval.knowledge_index import (
    KnowledgePort,
    KnowledgeSnapshot,
    SnapshotCache,
    as_memory,
    body_hash,
)
from quipu.retrieval.pipeline import RecallPipeline, RecallQuery
from quipu.storage.base import Vector

#: Cosine similarity (bundled model, title and body embedded together) at or above which a
#: new article is a near duplicate of an existing one and becomes a draft (KNOW-2). Measured on
#: the labelled pairs of :mod:`quipu.evals.novelty` (docs/knowledge.md, "Novelty gate").
NEAR_DUPLICATE = 0.579
#: Grant that lets a non-admin key erase (as for memories).
ERASE_GRANT = "memory:erase"


@dataclass(frozen=True)
class KnowledgeHit:
    """One search row: never the whole body, a bounded snippet (KNOW-1)."""

    article: ArticleVersion
    score: float
    rank: int
    matched: tuple[str, ...]
    snippet: str

    def to_dict(self) -> dict[str, Any]:
        a = self.article
        return {
            "id": a.id,
            "title": a.title,
            "category": a.category,
            "tags": list(a.tags),
            "score": round(self.score, 6),
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class KnowledgeResult:
    """A search's rows and ``meta`` (the pipeline's, minus what only memories have)."""

    results: list[KnowledgeHit]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"results": [h.to_dict() for h in self.results], "meta": self.meta}


@dataclass(frozen=True)
class _Gate:
    """What the novelty gate found for one text."""

    duplicate: ArticleVersion | None
    vector: Vector | None
    similar: ArticleVersion | None
    similarity: float | None


class KnowledgeService:
    """The knowledge plane's use cases over the memory service's store, embedder and guard."""

    def __init__(
        self,
        memories: MemoryService,
        *,
        near_duplicate: float = NEAR_DUPLICATE,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.memories = memories
        self.store = memories.store
        self.embedder = memories.embedder
        self.guard = memories.guard
        self.near_duplicate = near_duplicate
        self._clock = clock or (lambda: datetime.now(UTC))
        # one recall at a time per pipeline, keyword search inline: a pipeline per search
        # starts no threads (RecallPipeline._search_pool)
        self.limits = replace(memories.limits, recall_concurrency=1)
        self.snapshots = SnapshotCache(self.store.knowledge_generation, self.store.knowledge_live)
        #: What embeds search queries (a merged recall shares its query memo here).
        self.query_embedder: Embedder | None = self.embedder

    # -- writes ------------------------------------------------------------------------------
    def create(
        self,
        principal: Principal,
        title: object,
        body: object,
        *,
        category: object = None,
        tags: object = None,
        project: object = None,
        visibility: object = "tenant",
        status: object = "published",
        source: str = "explicit",
        memory_id: str | None = None,
        owner: str | None = None,
    ) -> ArticleWrite:
        """Store a new article through the novelty gate (KNOW-2): an exact duplicate of an
        article the caller can read answers with it (``deduplicated``), a near duplicate is
        stored as a draft linked to it (``gated_to_draft``), anything else as asked
        (``created``). 503 ``novelty_gate_unavailable`` when the gate cannot embed. ``owner``
        (graduation only) names the subject the article belongs to, else the writer."""
        fields = self._fields(principal, title, body, category, tags, project)
        vis = validate.enum(Visibility, visibility, field="visibility")
        wanted = _status(status)
        self._check_publish(principal, vis, wanted)
        self.guard.admit_write(principal)
        now = self._clock()
        article = ArticleVersion(
            id=uuid.uuid4().hex,
            version=1,
            tenant_id=principal.tenant_id,
            owner=owner or subject_of(principal),
            visibility=vis,
            status=wanted,
            source=source,
            related_id=None,
            memory_id=memory_id,
            content_hash=body_hash(fields["body"]),
            recorded_at=now,
            actor=principal.key_id,
            relation="created",
            **fields,
        )
        self.guard.screen(article)  # before the gate spends an embedding on it
        if self.guard.injected(article):
            article = replace(article, status=ArticleStatus.DRAFT)  # a reviewer publishes it
        gate = self._gate(principal, article)
        if gate.duplicate is not None:
            return ArticleWrite(Verdict.DEDUPLICATED, gate.duplicate)
        verdict = Verdict.CREATED
        if gate.similar is not None:
            verdict = Verdict.GATED_TO_DRAFT
            article = replace(article, status=ArticleStatus.DRAFT, related_id=gate.similar.id)
        self.store.knowledge_put(article, gate.vector)
        self.guard.audit(
            principal,
            "knowledge.create",
            (article.id,),
            details={"verdict": verdict.value, "related_id": article.related_id},
        )
        return ArticleWrite(verdict, article, article.related_id, gate.similarity)

    def update(
        self,
        principal: Principal,
        article_id: object,
        *,
        expected_version: object = None,
        title: object = None,
        body: object = None,
        category: object = None,
        tags: object = None,
        visibility: object = None,
        status: object = None,
        reason: object = None,
    ) -> ArticleWrite:
        """A new version of an article with the given fields changed (KNOW-1). The novelty
        gate runs on the new text: an exact duplicate of another article answers with that one
        and writes nothing; a near duplicate of another makes this version a draft linked to
        it (``gated_to_draft``); else ``updated``."""
        current = self._readable(principal, article_id)
        if expected_version is None:
            raise PreconditionRequired(
                "updating an article needs expected_version (the version you read)",
                details={"id": current.id, "current_version": current.version},
            )
        expected = validate.bounded_int(
            expected_version, field="expected_version", low=1, high=2**31 - 1
        )
        self._check_owner(principal, current)
        fields = self._fields(
            principal,
            current.title if title is None else title,
            current.body if body is None else body,
            current.category if category is None else category,
            current.tags if tags is None else tags,
            None,
        )
        fields["project"] = current.project
        vis = (
            current.visibility
            if visibility is None
            else validate.enum(Visibility, visibility, field="visibility")
        )
        wanted = current.status if status is None else _status(status)
        if (vis, wanted) != (current.visibility, current.status):
            self._check_publish(principal, vis, wanted)
        self.guard.admit_write(principal)
        why = _reason(reason)
        article = replace(
            current,
            version=expected + 1,
            visibility=vis,
            status=wanted,
            content_hash=body_hash(fields["body"]),
            recorded_at=self._clock(),
            actor=principal.key_id,
            relation="revises",
            reason=why,
            related_id=None,
            **fields,
        )
        self.guard.screen(article)
        if self.guard.injected(article):
            article = replace(article, status=ArticleStatus.DRAFT)
        text_changed = (article.title, article.body) != (current.title, current.body)
        vector: Vector | None = None
        verdict = Verdict.UPDATED
        similarity = None
        if text_changed:
            gate = self._gate(principal, article)
            if gate.duplicate is not None:
                return ArticleWrite(Verdict.DEDUPLICATED, gate.duplicate)
            vector, similarity = gate.vector, gate.similarity
            if gate.similar is not None:
                verdict = Verdict.GATED_TO_DRAFT
                article = replace(article, status=ArticleStatus.DRAFT, related_id=gate.similar.id)
        else:
            vector = self._stored_vector(current)
        self.store.knowledge_put(article, vector)
        self.guard.audit(
            principal,
            "knowledge.update",
            (article.id,),
            reason=why,
            details={"verdict": verdict.value, "version": article.version},
        )
        return ArticleWrite(verdict, article, article.related_id, similarity)

    @erase_path("knowledge")
    def erase(self, principal: Principal, article_id: object, *, reason: object) -> bool:
        """Remove every version's content, leaving a tombstone (LIFE-4): an admin or the
        ``memory:erase`` grant, with a reason; 409 ``legal_hold`` under a hold on the tenant,
        or on a memory the article graduated from or that memory's subject."""
        if not is_admin(principal) and ERASE_GRANT not in principal.grants:
            raise Forbidden(
                "erasing needs an admin key or the memory:erase grant", code="erase_forbidden"
            )
        why = _reason(reason)
        if not why or not why.strip():
            raise InvalidInput("an erase needs a reason", code="reason_required")
        current = self._readable(principal, article_id)
        tombstone = article_tombstone(current, principal.key_id, self._clock())
        # an article graduated from memories is held with them and with their subjects
        sources = {
            v.memory_id
            for v in self.store.knowledge_history(principal.tenant_id, current.id)
            if v.memory_id
        }
        subjects = memory_subjects(self.store, principal.tenant_id, sources)
        with under_holds(self.store, Reach.of(principal.tenant_id, sources, subjects)):
            erased = self.store.knowledge_erase(tombstone)
            self.guard.audit(principal, "knowledge.erase", (current.id,), reason=why)
        return erased

    # -- reads -------------------------------------------------------------------------------
    def get(
        self, principal: Principal, article_id: object, *, as_of: object = None
    ) -> ArticleVersion:
        """The current version, or the one current at ``as_of``; 404 when the caller may not
        read it (the same answer as a missing id, SCOPE-7)."""
        when = validate.instant(as_of, field="as_of")
        if when is None:
            return self._readable(principal, article_id)
        self._readable(principal, article_id)
        ident = validate.identifier(article_id, field="id")
        found = self.store.knowledge_get(principal.tenant_id, ident, when)
        if found is None or not can_read(principal, found):
            raise _not_found(ident)
        return found

    def history(self, principal: Principal, article_id: object) -> list[ArticleVersion]:
        current = self._readable(principal, article_id)
        return self.store.knowledge_history(principal.tenant_id, current.id)

    def search(
        self,
        principal: Principal,
        query: object,
        *,
        k: object = None,
        category: object = None,
        tags: object = None,
        project: object = None,
        started: float | None = None,
    ) -> KnowledgeResult:
        """Hybrid search of the articles the caller may read (KNOW-1): the recall pipeline
        (:mod:`quipu.retrieval.pipeline`) over the tenant's own BM25 statistics and vectors;
        rows ``{id, title, category, tags, score, snippet}``."""
        begun = time.perf_counter() if started is None else started
        lim = self.limits
        text = validate.query(query, max_chars=lim.max_query_chars)
        size = validate.bounded_int(
            lim.default_k if k is None else k, field="k", low=1, high=lim.max_k
        )
        flt = Filters(
            tags=frozenset(validate.labels(tags, field="tags", max_count=lim.max_tags)),
            project=validate.optional_id(project, field="project"),
        )
        wanted_category = None if category is None else _category(category)
        snap = self.snapshot(principal.tenant_id)
        # who may read what depends on the reader's kind, not on the reader: one mask per
        # kind and filters, kept with the snapshot (a write makes a new snapshot)
        allowed = snap.mask(
            ("search", _reader(principal), wanted_category, flt.tags, flt.project),
            lambda: np.array(
                [
                    can_read(principal, a)
                    and (wanted_category is None or a.category == wanted_category)
                    and flt.accepts(as_memory(a))
                    for a in snap.articles
                ],
                dtype=bool,
            ),
        )
        port = KnowledgePort(snap, allowed)
        pipeline = RecallPipeline(port, self.query_embedder, lim, self._clock)
        ref = ScopeRef(principal.tenant_id, Scope.TENANT, principal.tenant_id)
        found = pipeline.recall(RecallQuery(text, ref, flt, size), begun)
        hits = [
            KnowledgeHit(
                snap.articles[snap.by_id[h.memory.id]],
                h.score,
                h.rank,
                h.matched,
                snap.snippet(snap.by_id[h.memory.id], text),
            )
            for h in found.results
        ]
        keep = ("total", "limit", "fallback", "reason", "underfilled", "create_safety", "paths")
        meta = {name: found.meta[name] for name in keep if name in found.meta}
        meta["candidates"] = int(allowed.sum())
        meta["timings"] = found.meta.get("timings", {})
        return KnowledgeResult(hits, meta)

    def list_articles(
        self,
        principal: Principal,
        *,
        status: object = None,
        category: object = None,
        tags: object = None,
        project: object = None,
        cursor: object = None,
        limit: object = None,
    ) -> ArticlePage:
        """The live articles the caller may read (KNOW-1: agents published ones and their own,
        ``owner`` visibility only for its owner and admins), by id, ``limit`` a page (1 to
        ``max_page``, that when omitted); ``cursor`` is the ``next_cursor`` of the page before.
        ``tags``: the article holds them all; ``project``: the partition, as for search
        (without it, articles of no project; with it, that project's and those of none)."""
        wanted = None if status is None else _status(status)
        flt = Filters(
            tags=frozenset(validate.labels(tags, field="tags", max_count=self.limits.max_tags)),
            project=validate.optional_id(project, field="project"),
        )
        wanted_category = None if category is None else _category(category)
        after = None if cursor is None else _cursor(cursor)
        size = self.guard.page_size(limit if limit is None else _whole(limit))
        snap = self.snapshot(principal.tenant_id)
        allowed = snap.mask(
            ("list", _reader(principal), wanted, wanted_category, flt.tags, flt.project),
            lambda: np.array(
                [
                    can_read(principal, a)
                    and (wanted is None or a.status is wanted)
                    and (wanted_category is None or a.category == wanted_category)
                    and flt.accepts(as_memory(a))
                    for a in snap.articles
                ],
                dtype=bool,
            ),
        )
        ids = sorted(snap.articles[at].id for at in np.flatnonzero(allowed).tolist())
        start = 0 if after is None else bisect.bisect_right(ids, after)
        chosen = ids[start : start + size]
        more = start + size < len(ids)
        return ArticlePage(
            [ArticleSummary.of(snap.articles[snap.by_id[i]]) for i in chosen],
            chosen[-1] if more and chosen else None,
        )

    def snapshot(self, tenant_id: str) -> KnowledgeSnapshot:
        """The tenant's live articles, ready to search (rebuilt after a write)."""
        return self.snapshots.get(tenant_id, self._dimension())

    # -- the novelty gate (KNOW-2) -----------------------------------------------------------
    def _gate(self, principal: Principal, article: ArticleVersion) -> _Gate:
        """Exact duplicate first (no embedding needed), then the article's vector and its
        nearest readable neighbour. Articles the caller cannot read take no part: they would
        otherwise be revealed by the answer."""
        for other in self.store.knowledge_by_hash(article.tenant_id, article.content_hash):
            if other.id != article.id and can_read(principal, other):
                return _Gate(other, None, None, None)
        vector = self._embed(article)
        snap = self.snapshot(article.tenant_id)
        best, best_score = None, -1.0
        if len(snap.articles) and snap.vectors.shape[1] == vector.shape[0]:
            scores = snap.vectors @ vector
            for at, other in enumerate(snap.articles):
                if not snap.has_vector[at] or other.id == article.id:
                    continue
                if not can_read(principal, other):
                    continue
                if float(scores[at]) > best_score:
                    best, best_score = other, float(scores[at])
        if best is not None and best_score >= self.near_duplicate:
            return _Gate(None, vector, best, best_score)
        return _Gate(None, vector, None, None if best is None else best_score)

    def _embed(self, article: ArticleVersion) -> Vector:
        if self.embedder is None:
            raise _gate_down("no embedder is configured")
        try:
            vector: Vector = self.embedder.embed_batch([embedding_text(article)])[0]
        except EmbeddingUnavailable as exc:
            raise _gate_down(exc.message) from None
        return vector

    def _stored_vector(self, article: ArticleVersion) -> Vector | None:
        snap = self.snapshot(article.tenant_id)
        at = snap.by_id.get(article.id)
        if at is None or not snap.has_vector[at]:
            return None
        vector: Vector = snap.vectors[at]
        return vector

    def _dimension(self) -> int:
        if self.embedder is not None:
            return self.embedder.dimension
        pin = self.store.embedding_pin()
        return 0 if pin is None else pin.dimension

    # -- checks ------------------------------------------------------------------------------
    def _fields(
        self,
        principal: Principal,
        title: object,
        body: object,
        category: object,
        tags: object,
        project: object,
    ) -> dict[str, Any]:
        title_v = validate.text(title, max_bytes=4 * MAX_TITLE_CHARS, field="title").strip()
        if len(title_v) > MAX_TITLE_CHARS:
            raise InvalidInput(
                f"title must be at most {MAX_TITLE_CHARS} characters",
                code="text_too_long",
                details={"field": "title", "limit": MAX_TITLE_CHARS},
            )
        return {
            "title": title_v,
            "body": validate.text(body, max_bytes=MAX_BODY_BYTES, field="body"),
            "category": None if category is None else _category(category),
            "tags": validate.labels(tags, field="tags", max_count=self.limits.max_tags),
            "project": self.guard.project(principal, project),
        }

    def _readable(self, principal: Principal, article_id: object) -> ArticleVersion:
        ident = validate.identifier(article_id, field="id")
        found = self.store.knowledge_get(principal.tenant_id, ident)
        if found is None or not can_read(principal, found):
            raise _not_found(ident)
        return found

    def _check_owner(self, principal: Principal, article: ArticleVersion) -> None:
        if article.owner == subject_of(principal) or is_admin(principal):
            return
        if article.visibility is Visibility.TENANT and _tenant_writer(principal):
            return
        raise Forbidden(
            "only the article's owner or a tenant writer may change it",
            code="not_owner",
            details={"id": article.id},
        )

    def _check_publish(
        self, principal: Principal, visibility: Visibility, status: ArticleStatus
    ) -> None:
        if visibility is Visibility.TENANT and status is ArticleStatus.PUBLISHED:
            check_write(principal, resolve_scope(principal, "tenant"))


def embedding_text(article: ArticleVersion) -> str:
    """What an article's vector is made from: its title, then its body."""
    return f"{article.title}\n\n{article.body}"


def _reader(principal: Principal) -> tuple[bool, str, bool]:
    """What :func:`~quipu.core.knowledge.can_read` reads of a principal of the tenant: readers
    alike in it see the same articles."""
    return is_admin(principal), subject_of(principal), principal.role is Role.AGENT


def _cursor(value: object) -> str:
    try:
        return validate.identifier(value, field="cursor")
    except InvalidInput:
        raise InvalidInput(
            "cursor must be the next_cursor of an earlier page",
            code="invalid_cursor",
            details={"field": "cursor"},
        ) from None


def _whole(value: object) -> int:
    """A page size as given: a whole number (a string or a float is 422 ``invalid_limit``)."""
    return validate.bounded_int(value, field="limit", low=1, high=2**31 - 1)


def _tenant_writer(principal: Principal) -> bool:
    try:
        check_write(principal, resolve_scope(principal, "tenant"))
    except Forbidden:
        return False
    return True


def _status(value: object) -> ArticleStatus:
    found = validate.enum(ArticleStatus, value, field="status")
    if found is ArticleStatus.ERASED:
        raise InvalidInput(
            "an article is draft or published (erase it to remove it)",
            code="invalid_status",
            details={"field": "status", "allowed": ["draft", "published"]},
        )
    return found


def _category(value: object) -> str:
    (found,) = validate.labels([value], field="category", max_count=1)
    if len(found) > MAX_CATEGORY_CHARS:
        raise InvalidInput(
            f"category must be at most {MAX_CATEGORY_CHARS} characters",
            details={"field": "category"},
        )
    return found


def _gate_down(why: str) -> Unavailable:
    return Unavailable(
        f"the novelty gate cannot run ({why}); nothing was stored, retry later",
        code="novelty_gate_unavailable",
    )


def _not_found(article_id: str) -> NotFound:
    """The one 404 for a missing, a foreign and a hidden article alike (SCOPE-7)."""
    return NotFound(f"no article {article_id}", details={"id": article_id})
