"""Domain records: the types every layer speaks. Pure data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Scope(StrEnum):
    AGENT = "agent"
    USER = "user"
    AGENT_USER = "agent_user"
    TENANT = "tenant"
    GLOBAL = "global"


class Kind(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    PROCEDURE = "procedure"
    EPISODE = "episode"
    EXPERIENCE = "experience"
    NOTE = "note"


class Status(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    STALE = "stale"
    CONFLICTED = "conflicted"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    ARCHIVED = "archived"
    QUARANTINED = "quarantined"
    UNAVAILABLE = "unavailable"
    REJECTED = "rejected"
    """A reviewer turned the candidate or quarantined memory down, or refuted it (LIFE-5, 7)."""
    ERASED = "erased"
    """The tombstone of a family whose content was erased (LIFE-4); nothing follows it."""


class Source(StrEnum):
    EXPLICIT = "explicit"
    PROMOTED = "promoted"
    EXTRACTED = "extracted"
    HARVESTED = "harvested"
    GRADUATED = "graduated"
    IMPORTED = "imported"


class Trust(StrEnum):
    VERIFIED = "verified"
    UNVERIFIED = "unverified"


class Relation(StrEnum):
    """How a version relates to the one before it (LIFE-7)."""

    CREATED = "created"
    REVISES = "revises"
    SUPERSEDED_BY = "superseded_by"
    SUPERSEDES = "supersedes"
    STATUS = "status"
    FORGETS = "forgets"
    RESTORES = "restores"
    MERGES = "merges"
    REVIEWS = "reviews"
    JUDGES = "judges"
    ERASES = "erases"
    IMPORTED = "imported"


class Role(StrEnum):
    AGENT = "agent"
    USER = "user"
    SERVICE = "service"
    ADMIN = "admin"
    SUPERADMIN = "superadmin"


@dataclass(frozen=True)
class Principal:
    """Who makes a request, resolved from a credential alone (SCOPE-1)."""

    tenant_id: str
    key_id: str
    role: Role
    agent_id: str | None = None
    user_id: str | None = None
    grants: frozenset[str] = frozenset()
    surface: str = "library"
    parent_key_id: str | None = None
    """For a run token, the service key that minted it."""

    @property
    def rate_key(self) -> str:
        """The bucket a write spends from (issue 20 defect 12): a key's own, or for a run token
        its service key's and subject's together, so minting a fresh token resets nothing."""
        if self.parent_key_id is None:
            return self.key_id
        return f"{self.parent_key_id}\x1f{self.agent_id or ''}\x1f{self.user_id or ''}"


@dataclass(frozen=True)
class ScopeRef:
    """One isolation partition: tenant, scope and the owner derived from the principal."""

    tenant_id: str
    scope: Scope
    owner: str


@dataclass(frozen=True)
class Provenance:
    """Where a version came from (MEM-3). Surface and key are stamped by the server."""

    surface: str = "library"
    key_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    quote: str | None = None
    quote_start: int | None = None
    quote_end: int | None = None
    judged_by: str | None = None
    """The key that last affirmed or refuted this memory (MEM-3)."""
    judged_at: datetime | None = None
    verdict: str | None = None
    """``affirmed`` or ``refuted``: the last judgement, or ``corroborated`` when an independent
    write verified it (:data:`quipu.core.governance.VERDICTS`)."""
    turn_seq: int | None = None
    """The session turn a promoted memory came from (its sequence number; issue 24)."""
    turn_role: str | None = None
    """That turn's role (``user``, ``assistant``): episodes keep both speakers."""
    turn_start: int | None = None
    """An episode's offsets in its turn: ``content[turn_start:turn_end]`` is its text."""
    turn_end: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name not in data or data[name] is None:
                continue
            value = data[name]
            if name.endswith("_at") and isinstance(value, str):
                value = datetime.fromisoformat(value)
            values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class TurnRef:
    """Where in a session a promoted memory came from: the turn's sequence number and role,
    and optionally the memory's character offsets in it (an episode's verbatim span)."""

    seq: int
    role: str
    start: int | None = None
    end: int | None = None

    def provenance(self) -> dict[str, Any]:
        """The :class:`Provenance` fields this fills."""
        return {
            "turn_seq": self.seq,
            "turn_role": self.role,
            "turn_start": self.start,
            "turn_end": self.end,
        }


@dataclass(frozen=True)
class MemoryVersion:
    """One immutable version of a memory family (MEM-1). ``id`` names the family."""

    id: str
    version: int
    tenant_id: str
    scope: Scope
    owner: str
    project: str | None
    text: str
    kind: Kind
    status: Status
    confidence: float
    source: Source
    trust: Trust
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    aliases: tuple[str, ...]
    provenance: Provenance
    observed_at: datetime | None
    valid_at: datetime
    invalid_at: datetime | None
    recorded_at: datetime
    content_hash: str
    embedding_model: str | None
    relation: Relation
    actor: str
    reason: str | None = None
    related_id: str | None = None
    is_current: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "scope": self.scope.value,
            "project": self.project,
            "text": self.text,
            "kind": self.kind.value,
            "status": self.status.value,
            "confidence": self.confidence,
            "source": self.source.value,
            "trust": self.trust.value,
            "tags": list(self.tags),
            "metadata": self.metadata,
            "aliases": list(self.aliases),
            "provenance": self.provenance.to_dict(),
            "observed_at": _iso(self.observed_at),
            "valid_at": _iso(self.valid_at),
            "invalid_at": _iso(self.invalid_at),
            "recorded_at": _iso(self.recorded_at),
            "content_hash": self.content_hash,
            "embedding_model": self.embedding_model,
            "relation": self.relation.value,
            "actor": self.actor,
            "reason": self.reason,
            "related_id": self.related_id,
            "is_current": self.is_current,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, tenant_id: str, owner: str) -> MemoryVersion:
        """The inverse of :meth:`to_dict`, which leaves out tenant and owner (callers supply
        them). Raises KeyError, TypeError or ValueError on a malformed dict."""
        return cls(
            id=str(data["id"]),
            version=int(data["version"]),
            tenant_id=tenant_id,
            scope=Scope(data["scope"]),
            owner=owner,
            project=data.get("project"),
            text=str(data["text"]),
            kind=Kind(data["kind"]),
            status=Status(data["status"]),
            confidence=float(data["confidence"]),
            source=Source(data["source"]),
            trust=Trust(data["trust"]),
            tags=tuple(data["tags"]),
            metadata=dict(data["metadata"]),
            aliases=tuple(data["aliases"]),
            provenance=Provenance.from_dict(dict(data.get("provenance") or {})),
            observed_at=_parse(data.get("observed_at")),
            valid_at=datetime.fromisoformat(data["valid_at"]),
            invalid_at=_parse(data.get("invalid_at")),
            recorded_at=datetime.fromisoformat(data["recorded_at"]),
            content_hash=str(data["content_hash"]),
            embedding_model=data.get("embedding_model"),
            relation=Relation(data["relation"]),
            actor=str(data["actor"]),
            reason=data.get("reason"),
            related_id=data.get("related_id"),
            is_current=bool(data["is_current"]),
        )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True)
class NewMemory:
    """What a caller asks to remember, validated and normalised by the service."""

    text: str
    kind: Kind = Kind.FACT
    confidence: float = 1.0
    source: Source = Source.EXPLICIT
    trust: Trust = Trust.VERIFIED
    status: Status = Status.ACTIVE
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    project: str | None = None
    observed_at: datetime | None = None
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    provenance: Provenance = field(default_factory=Provenance)


@dataclass(frozen=True)
class WriteResult:
    """The outcome of a remember: the memory and whether it already existed (MEM-6)."""

    memory: MemoryVersion
    created: bool

    @property
    def notice(self) -> dict[str, str] | None:
        """What the writer must be told beyond the memory itself: a write held for review
        (SAFE-2) is stored but never recalled until a reviewer releases it, and an agent
        that only looked at ``created`` would believe it remembered."""
        if self.memory.status is not Status.QUARANTINED:
            return None
        return {
            "code": "quarantined",
            "message": "stored but held for review: the text reads like instructions to a"
            " model, so it is not recalled until a reviewer activates it"
            f" (POST /v1/review/{self.memory.id} with decision 'activate', or the console's"
            " review queue)",
        }

    def to_dict(self) -> dict[str, Any]:
        """The answer of every surface to a remember: ``memory``, ``created`` and, when there
        is one, ``notice``."""
        answer: dict[str, Any] = {"memory": self.memory.to_dict(), "created": self.created}
        if (notice := self.notice) is not None:
            answer["notice"] = notice
        return answer
