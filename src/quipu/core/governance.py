"""The governance plane's records and rules (LIFE-4..8, SCOPE-6, SCOPE-8). Pure data.

- A **legal hold** on a memory, a subject (an end user) or a whole tenant makes every erase
  that would touch it refuse with 409 ``legal_hold`` and change nothing.
- An **erase** leaves, of every version of a family, only ids, times, the content digest, the
  actor and the relation; its last version is a tombstone (status ``erased``) with the eraser
  and the reason. :func:`erased_version` and :func:`tombstone` say exactly what is kept.
- A **snapshot** pins exact versions for a run; resolving it re-checks access and withholds,
  with a reason, every member that is no longer readable (fail closed).
- A **project** registry per tenant: writes name a registered project or none (SCOPE-6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from quipu.core.auth import Actor
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Provenance,
    Relation,
    Scope,
    ScopeRef,
    Status,
    Trust,
)
from quipu.core.versions import Change

#: The outcome of a judgement (MEM-3): stamped on a new version with who judged and when.
AFFIRMED = "affirmed"
REFUTED = "refuted"
#: Not a reviewer's verdict: an independent explicit write stated an unverified memory again.
CORROBORATED = "corroborated"
VERDICTS = (AFFIRMED, REFUTED, CORROBORATED)

#: Lets a key erase memories and subjects of its tenant (LIFE-4); admins may without it.
ERASE_GRANT = "memory:erase"

#: The separator of composite owners (``agent\x1fuser``), as :mod:`quipu.core.scopes` joins them.
SEP = "\x1f"


class HoldKind(StrEnum):
    MEMORY = "memory"
    SUBJECT = "subject"
    TENANT = "tenant"


@dataclass(frozen=True)
class Hold:
    """A legal hold: while ``released_at`` is unset, no erase may touch its target."""

    tenant_id: str
    hold_id: str
    kind: HoldKind
    target: str
    reason: str
    created_by: str
    created_at: datetime
    released_by: str | None = None
    released_at: datetime | None = None
    release_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.released_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "hold_id": self.hold_id,
            "kind": self.kind.value,
            "target": self.target,
            "reason": self.reason,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "released_by": self.released_by,
            "released_at": None if self.released_at is None else self.released_at.isoformat(),
            "release_reason": self.release_reason,
            "active": self.active,
        }


@dataclass(frozen=True)
class Erasure:
    """Who erases and why, for the tombstones and the audit line the store writes with them."""

    by: Actor
    reason: str
    at: datetime


@dataclass
class EraseReport:
    """What an erase removed, counted per table (a subject erasure adds its batches up)."""

    families: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, table: str, count: int) -> None:
        self.counts[table] = self.counts.get(table, 0) + int(count)

    def merge(self, other: EraseReport) -> None:
        self.families += other.families
        for table, count in other.counts.items():
            self.add(table, count)

    def to_dict(self) -> dict[str, Any]:
        return {"families": len(self.families), "counts": dict(sorted(self.counts.items()))}


def subject_of(ref: ScopeRef) -> str | None:
    """The end user a scope partition is about: the owner of a ``user`` scope, the user half of
    an ``agent_user`` owner; None for agent, tenant and global scopes."""
    if ref.scope is Scope.USER:
        return ref.owner
    if ref.scope is Scope.AGENT_USER:
        user = ref.owner.partition(SEP)[2]
        return user or None
    return None


def session_subject(owner: str) -> str | None:
    """The end user of a session owner (``agent\\x1fuser``, :func:`~quipu.core.sessions.
    session_owner`), or None when the session has none."""
    return owner.partition(SEP)[2] or None


#: Provenance fields an erased version keeps: ids and times only, never a quote or a model name.
_KEPT_PROVENANCE = ("surface", "key_id", "session_id", "run_id", "agent_id", "judged_by")


def erased_provenance(p: Provenance) -> Provenance:
    """``p`` with everything but ids and the judgement's time removed (LIFE-4)."""
    kept: dict[str, Any] = {name: getattr(p, name) for name in _KEPT_PROVENANCE}
    return Provenance(**kept, judged_at=p.judged_at)


def erased_version(m: MemoryVersion) -> MemoryVersion:
    """What remains of one version after an erase: ids, times, digest, actor and relation."""
    return replace(
        m,
        text="",
        tags=(),
        metadata={},
        aliases=(),
        provenance=erased_provenance(m.provenance),
        reason=None,
        embedding_model=None,
    )


def tombstone(current: MemoryVersion, erasure: Erasure) -> MemoryVersion:
    """The family's last version: status ``erased``, the eraser and the reason, the digest of
    the content it replaces, and nothing of that content."""
    return replace(
        erased_version(current),
        version=current.version + 1,
        status=Status.ERASED,
        relation=Relation.ERASES,
        actor=erasure.by.key_id,
        reason=erasure.reason,
        recorded_at=erasure.at,
        related_id=None,
        provenance=Provenance(surface=erasure.by.surface, key_id=erasure.by.key_id),
        is_current=True,
    )


@dataclass(frozen=True)
class SnapshotMember:
    id: str
    version: int


@dataclass(frozen=True)
class Snapshot:
    """Exact versions pinned for a run (LIFE-8), with who pinned them and when."""

    tenant_id: str
    snapshot_id: str
    label: str | None
    created_by: str
    created_at: datetime
    members: tuple[SnapshotMember, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "label": self.label,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "members": [{"id": m.id, "version": m.version} for m in self.members],
        }


@dataclass(frozen=True)
class Project:
    """One registered project of a tenant (SCOPE-6)."""

    tenant_id: str
    project_id: str
    name: str | None
    created_by: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "project_id": self.project_id,
            "name": self.name,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class SubjectInfo:
    """One scope owner of a tenant and how many live memories it holds (SCOPE-8)."""

    scope: Scope
    owner: str
    live: int

    def to_dict(self) -> dict[str, Any]:
        agent, _, user = self.owner.partition(SEP)
        out: dict[str, Any] = {"scope": self.scope.value, "owner": self.owner, "live": self.live}
        if self.scope is Scope.AGENT_USER:
            out.update(agent_id=agent, user_id=user)
        return out


def counts_dict(counts: Mapping[str, int]) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(counts.items())}


def corroboration(
    existing: MemoryVersion, written: MemoryVersion, by: Principal, now: datetime
) -> Change | None:
    """The change that makes ``existing`` verified because ``by`` wrote it again (CONSOL-3), or
    None. Only an independent source corroborates: an explicit (verified) write of the same
    text by another key of another agent than the one the unverified row came from (a
    promotion, an extractor) — the same agent saying it again is not a second source — or
    the same statement extracted again from a second session."""
    source = existing.provenance
    if existing.trust is not Trust.UNVERIFIED:
        return None
    again = written.provenance.session_id
    if written.trust is Trust.UNVERIFIED and again and source.session_id not in (None, again):
        # Said again in a second session (issue 24, CONSOL-3): independent of the first.
        return Change(
            actor=by.key_id,
            relation=Relation.JUDGES,
            reason="corroborated by a second session",
            trust=Trust.VERIFIED,
            provenance=replace(source, judged_by=by.key_id, judged_at=now, verdict=CORROBORATED),
        )
    if written.trust is not Trust.VERIFIED:
        return None
    if by.key_id == source.key_id or (by.agent_id is not None and by.agent_id == source.agent_id):
        return None
    return Change(
        actor=by.key_id,
        relation=Relation.JUDGES,
        reason="corroborated by an independent explicit write",
        trust=Trust.VERIFIED,
        provenance=replace(source, judged_by=by.key_id, judged_at=now, verdict=CORROBORATED),
    )
