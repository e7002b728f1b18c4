"""The knowledge plane's records and rules (KNOW-1, KNOW-2, RECALL-6, RECALL-9, GRAD-1). Pure:
no I/O. The use cases are in :mod:`quipu.knowledge`; the stores keep these records in their own
tables (``knowledge_versions``, ``recall_ledger``, ``usage_events``, ``memory_usage``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from quipu.core.records import Principal, Role
from quipu.core.text import fold

#: Longest title, in characters (KNOW-1).
MAX_TITLE_CHARS = 200
#: Largest article body, in UTF-8 bytes (KNOW-1): a page of markdown, not a document (DOC-1).
MAX_BODY_BYTES = 32_768
#: Longest category name, in characters.
MAX_CATEGORY_CHARS = 64


class Visibility(StrEnum):
    TENANT = "tenant"
    """Every reader of the tenant the status allows (agents: published only)."""
    OWNER = "owner"
    """Only the article's owner and the tenant's admins."""


class ArticleStatus(StrEnum):
    DRAFT = "draft"
    PUBLISHED = "published"
    ERASED = "erased"
    """The tombstone of an erased article; nothing follows it."""


class Verdict(StrEnum):
    """The novelty gate's answer to a write (KNOW-2)."""

    CREATED = "created"
    """Novel: stored as asked (201)."""
    GATED_TO_DRAFT = "gated_to_draft"
    """A near duplicate: stored as a draft linked to the article it resembles (201)."""
    DEDUPLICATED = "deduplicated"
    """An exact duplicate: nothing stored, the existing article answers (200)."""
    UPDATED = "updated"
    """An update that passed the gate (200)."""


@dataclass(frozen=True)
class ArticleVersion:
    """One immutable version of a knowledge article; ``id`` names the article (KNOW-1)."""

    id: str
    version: int
    tenant_id: str
    owner: str
    """The subject that wrote the first version (:func:`subject_of`)."""
    title: str
    body: str
    category: str | None
    tags: tuple[str, ...]
    project: str | None
    visibility: Visibility
    status: ArticleStatus
    source: str
    """``explicit`` (written by a caller) or ``graduated`` (from a memory, GRAD-1)."""
    related_id: str | None
    """The article this one resembled when the novelty gate made it a draft."""
    memory_id: str | None
    """The memory this article graduated from."""
    content_hash: str
    recorded_at: datetime
    actor: str
    relation: str
    """``created``, ``revises`` or ``erases``."""
    reason: str | None = None
    is_current: bool = True

    def summary(self) -> dict[str, Any]:
        """The article without its body (what lists and gates answer)."""
        return {
            "id": self.id,
            "version": self.version,
            "title": self.title,
            "category": self.category,
            "tags": list(self.tags),
            "project": self.project,
            "visibility": self.visibility.value,
            "status": self.status.value,
            "source": self.source,
            "related_id": self.related_id,
            "memory_id": self.memory_id,
            "recorded_at": self.recorded_at.isoformat(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "body": self.body,
            "owner": self.owner,
            "content_hash": self.content_hash,
            "actor": self.actor,
            "relation": self.relation,
            "reason": self.reason,
            "is_current": self.is_current,
        }


@dataclass(frozen=True)
class ArticleWrite:
    """The outcome of a create or update: the verdict and the article that answers it."""

    verdict: Verdict
    article: ArticleVersion
    similar_to: str | None = None
    similarity: float | None = None

    @property
    def created(self) -> bool:
        return self.verdict in (Verdict.CREATED, Verdict.GATED_TO_DRAFT)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verdict": self.verdict.value,
            "created": self.created,
            "article": self.article.to_dict(),
        }
        if self.similar_to is not None:
            out["similar_to"] = self.similar_to
            out["similarity"] = None if self.similarity is None else round(self.similarity, 6)
        return out


@dataclass(frozen=True)
class UsageEvent:
    """One recall hit of a memory (RECALL-6): immutable once written."""

    tenant_id: str
    event_id: str
    memory_id: str
    recall_id: str
    score: float
    relevant: bool
    at: datetime


@dataclass(frozen=True)
class MemoryUsage:
    """A memory's recall signal and graduation stamp (RECALL-6, GRAD-1)."""

    tenant_id: str
    memory_id: str
    recall_count: int
    last_bumped_at: datetime | None
    graduated_at: datetime | None
    article_id: str | None
    re_scoped: bool = False


@dataclass(frozen=True)
class RecallLedger:
    """What one merged recall surfaced to whom (RECALL-9): the ids ``referenced`` accepts."""

    tenant_id: str
    recall_id: str
    subject: str
    items: tuple[str, ...]
    at: datetime


def subject_of(principal: Principal) -> str:
    """Who a principal is inside its tenant for the knowledge plane: its agent id, else its
    key (the owner of the ``agent`` scope, SCOPE-1)."""
    return principal.agent_id or principal.key_id


def is_admin(principal: Principal) -> bool:
    return principal.role in (Role.ADMIN, Role.SUPERADMIN)


def can_read(principal: Principal, article: ArticleVersion) -> bool:
    """KNOW-1 read rules. Admins read every article of their tenant; an owner reads its own;
    ``owner`` visibility hides an article from everyone else; agent-role principals read
    published articles only; other roles (users, services) read drafts too."""
    if article.tenant_id != principal.tenant_id or article.status is ArticleStatus.ERASED:
        return False
    if is_admin(principal) or article.owner == subject_of(principal):
        return True
    if article.visibility is Visibility.OWNER:
        return False
    return principal.role is not Role.AGENT or article.status is ArticleStatus.PUBLISHED


def title_key(title: str) -> str:
    """The key a title is unique under per tenant: NFKC, case- and whitespace-folded."""
    return fold(title)


def article_tombstone(current: ArticleVersion, actor: str, at: datetime) -> ArticleVersion:
    """The version an erase leaves of an article (LIFE-4): ids, owner, provenance links and
    who and when; no title, body, category, tags or content hash."""
    return replace(
        current,
        version=current.version + 1,
        title="",
        body="",
        category=None,
        tags=(),
        status=ArticleStatus.ERASED,
        related_id=None,
        content_hash="",
        recorded_at=at,
        actor=actor,
        relation="erases",
        reason=None,
    )


@dataclass(frozen=True)
class ArticleSummary:
    """One row of an articles listing (KNOW-1): what an article is, never its body (read it
    with ``knowledge_get``)."""

    id: str
    version: int
    title: str
    category: str | None
    tags: tuple[str, ...]
    project: str | None
    visibility: Visibility
    status: ArticleStatus
    owner: str
    source: str
    related_id: str | None
    recorded_at: datetime

    @classmethod
    def of(cls, article: ArticleVersion) -> ArticleSummary:
        return cls(
            article.id,
            article.version,
            article.title,
            article.category,
            article.tags,
            article.project,
            article.visibility,
            article.status,
            article.owner,
            article.source,
            article.related_id,
            article.recorded_at,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "title": self.title,
            "category": self.category,
            "tags": list(self.tags),
            "project": self.project,
            "visibility": self.visibility.value,
            "status": self.status.value,
            "owner": self.owner,
            "source": self.source,
            "related_id": self.related_id,
            "recorded_at": self.recorded_at.isoformat(),
        }


@dataclass(frozen=True)
class ArticlePage:
    """A page of an articles listing, by id; ``next_cursor`` is None on the last page."""

    items: list[ArticleSummary]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"items": [a.to_dict() for a in self.items], "next_cursor": self.next_cursor}


#: How long an article shown to a session keeps it out of that session's later merged recalls
#: (RECALL-9 diversity); older rows count for nothing and the prune job deletes them.
SHOWN_TTL = timedelta(hours=24)
#: Most recently shown articles of one session a merged recall reads back.
SHOWN_PER_SESSION = 500


class CandidateStatus(StrEnum):
    """Where a model-written article body stands (GRAD-1, LIFE-5)."""

    CANDIDATE = "candidate"
    """Awaiting a reviewer; never part of the article until affirmed."""
    AFFIRMED = "affirmed"
    """A reviewer made it the article's body (a new version)."""
    REJECTED = "rejected"
    """A reviewer turned it down; the article is unchanged."""


@dataclass(frozen=True)
class ArticleCandidate:
    """A body a model wrote for a graduated article: a review candidate (GRAD-1, LIFE-5)."""

    tenant_id: str
    id: str
    article_id: str
    article_version: int
    """The article version the body was written for (affirming needs it still current)."""
    memory_id: str | None
    owner: str
    """The article's owner (the subject whose memory graduated): never its reviewer."""
    actor: str
    """The key whose graduation asked the model (the sweep: ``system:graduation``)."""
    body: str
    embedding_model: str
    """The chat model that wrote the body (named like a model id: not screened as text)."""
    status: CandidateStatus
    proposed_at: datetime
    truncated: bool = False
    """The model's answer was longer than an article body and was cut to fit."""
    injection_suspected: bool = False
    """The answer looked like a prompt injection; the body holds it defanged."""
    judged_by: str | None = None
    judged_at: datetime | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "article_id": self.article_id,
            "article_version": self.article_version,
            "memory_id": self.memory_id,
            "owner": self.owner,
            "actor": self.actor,
            "body": self.body,
            "model": self.embedding_model,
            "status": self.status.value,
            "proposed_at": self.proposed_at.isoformat(),
            "truncated": self.truncated,
            "injection_suspected": self.injection_suspected,
            "judged_by": self.judged_by,
            "judged_at": None if self.judged_at is None else self.judged_at.isoformat(),
            "reason": self.reason,
        }


class BodyWriter(Protocol):
    """What writes an article body from a graduated memory (GRAD-1): a chat model behind
    :class:`quipu.article_candidates.ModelBodyWriter`. Its output is only ever a review
    candidate (LIFE-5)."""

    model: str
    counts: Counter[str]
    """Proposals per outcome: ``proposed``, or why there was none."""

    def write(self, title: str, text: str) -> tuple[str, bool]:
        """(the model's body, whether the model stopped at its length limit). Raises
        :class:`quipu.article_candidates.BodyUnavailable` naming why there is none."""

    def close(self) -> None: ...
