"""Building the next immutable version of a family (MEM-4, LIFE-2, LIFE-7). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from quipu.core.lifecycle import FINAL, check_transition
from quipu.core.records import Kind, MemoryVersion, Provenance, Relation, Status, Trust
from quipu.core.text import content_hash
from quipu.errors import Conflict

V = TypeVar("V")

UNSET: Any = object()
_UNSET = UNSET


@dataclass(frozen=True)
class Change:
    """What one new version changes. Fields left unset carry over from the current version."""

    actor: str
    relation: Relation
    reason: str | None = None
    text: str | None = None
    status: Status | None = None
    kind: Kind | None = None
    confidence: float | None = None
    trust: Trust | None = None
    tags: tuple[str, ...] | None = None
    metadata: dict[str, Any] | None = None
    aliases: tuple[str, ...] | None = None
    valid_at: datetime | None = None
    invalid_at: Any = field(default=_UNSET)
    related_id: str | None = None
    provenance: Provenance | None = None
    embedding_model: str | None = None


_FINAL_WORD = {Status.UNAVAILABLE: "forgotten", Status.ERASED: "erased"}


def check_expected(current: MemoryVersion, expected_version: int | None) -> None:
    """Optimistic concurrency (LIFE-2): a stale expectation is a 409 ``version_conflict``."""
    if expected_version is not None and expected_version != current.version:
        raise Conflict(
            f"memory {current.id} is at version {current.version}, not {expected_version}",
            code="version_conflict",
            details={"id": current.id, "current_version": current.version},
        )


def next_version(current: MemoryVersion, change: Change, now: datetime) -> MemoryVersion:
    """The successor of ``current``; raises 409 on an illegal status move (LIFE-1)."""
    if current.status in FINAL:
        raise Conflict(
            f"memory {current.id} was {_FINAL_WORD[current.status]} and cannot change",
            code="illegal_transition",
            details={"from": current.status.value},
        )
    status: Status = current.status
    if change.status is not None and change.status is not current.status:
        check_transition(current.status, change.status)
        status = change.status
    text_changed = change.text is not None and change.text != current.text
    text = change.text if change.text is not None else current.text
    valid_at = change.valid_at or (now if text_changed else current.valid_at)
    invalid_at = current.invalid_at if change.invalid_at is _UNSET else change.invalid_at
    if text_changed and change.invalid_at is _UNSET:
        invalid_at = None
    return replace(
        current,
        version=current.version + 1,
        text=text,
        status=status,
        kind=change.kind or current.kind,
        confidence=current.confidence if change.confidence is None else change.confidence,
        trust=change.trust or current.trust,
        tags=current.tags if change.tags is None else change.tags,
        metadata=current.metadata if change.metadata is None else change.metadata,
        aliases=current.aliases if change.aliases is None else change.aliases,
        provenance=change.provenance or current.provenance,
        valid_at=valid_at,
        invalid_at=invalid_at,
        recorded_at=now,
        content_hash=content_hash(text),
        embedding_model=change.embedding_model if text_changed else current.embedding_model,
        relation=change.relation,
        actor=change.actor,
        reason=change.reason,
        related_id=change.related_id,
        is_current=True,
    )


def valid_to(version: MemoryVersion, successor: MemoryVersion | None) -> datetime | None:
    """End of the interval in which ``version`` was the family's truth, for ``as_of`` (MEM-2).

    A version stops at its own ``invalid_at``, or when a successor took over, whichever is first.
    """
    ends = [t for t in (version.invalid_at, successor.valid_at if successor else None) if t]
    return min(ends) if ends else None


def valid_at_instant(valid_at: datetime, end: datetime | None, instant: datetime) -> bool:
    """``valid_at <= T and (end is null or T < end)``."""
    return valid_at <= instant and (end is None or instant < end)


def import_order(
    items: Iterable[tuple[MemoryVersion, V]],
) -> list[tuple[MemoryVersion, V, MemoryVersion | None]]:
    """Imported versions with their successors, in the order they were first recorded: each
    then gets the context keys (the session's previous memory) it had where it came from."""
    families: dict[tuple[str, str], list[tuple[MemoryVersion, V]]] = {}
    for memory, vector in items:
        families.setdefault((memory.tenant_id, memory.id), []).append((memory, vector))
    planned = []
    for versions in families.values():
        versions.sort(key=lambda mv: mv[0].version)
        for i, (memory, vector) in enumerate(versions):
            successor = versions[i + 1][0] if i + 1 < len(versions) else None
            planned.append((memory, vector, successor))
    planned.sort(key=lambda p: (p[0].recorded_at, p[0].id, p[0].version))
    return planned
