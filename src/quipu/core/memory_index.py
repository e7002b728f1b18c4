"""The compiled memory index of a scope (CONSOL-1, CONSOL-2, CONSOL-3, CONSOL-5). Pure.

One index per scope partition: at most :data:`MAX_LINES` rendered lines, one active fact per
line with its date, provenance tag and source link, and an ``## Archive`` section for entries
that left the active set (superseded, expired, forgotten, erased, over capacity). Facts not yet
corroborated independently are labelled ``unverified`` (never hidden).

Every rewrite is checked by :func:`validate_rewrite`: an entry active in the previous version
must be active again or archived in the next one; a rewrite that silently drops one is refused
(409 ``index_entry_dropped``). Archived entries may leave later: the versions keep them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from quipu.core.records import Kind, MemoryVersion, ScopeRef, Source, Status, Trust
from quipu.core.text import fold
from quipu.errors import Conflict

#: Most rendered lines of one index, header and archive included (CONSOL-1).
MAX_LINES = 100
#: Lines the header and the ``## Archive`` heading take.
_FRAME_LINES = 2
#: Most archived entries a version keeps (older ones live in earlier versions).
MAX_ARCHIVE = 200
#: Kinds that are facts for the index; episodes are raw turns and stay out of it.
INDEXED_KINDS = frozenset(
    {Kind.FACT, Kind.PREFERENCE, Kind.DECISION, Kind.PROCEDURE, Kind.NOTE, Kind.EXPERIENCE}
)

#: Trust labels of an entry.
VERIFIED = "verified"
UNVERIFIED = "unverified"
CORROBORATED = "corroborated"

#: Why an entry is archived.
SUPERSEDED = "superseded"
EXPIRED = "expired"
FORGOTTEN = "forgotten"
ERASED = "erased"
OVER_CAPACITY = "over_capacity"
LEFT = "left"
"""The memory moved to another status (stale, conflicted, quarantined…) or out of reach."""
#: Fates whose archived line keeps the text; a forgotten, erased or withdrawn memory's text
#: leaves the index (LIFE-3, LIFE-4: the agent must not read it again).
_KEEPS_TEXT = frozenset({SUPERSEDED, EXPIRED, OVER_CAPACITY})


class IndexEntryDropped(Conflict):
    """A rewrite left out an entry the previous version had active (CONSOL-2)."""

    default_code = "index_entry_dropped"


class IndexTooLong(Conflict):
    """A rewrite has more active entries than the index may show (CONSOL-1)."""

    default_code = "index_too_long"


@dataclass(frozen=True)
class IndexEntry:
    """One line of the index: a memory family as the index shows it."""

    memory_id: str
    version: int
    date: str
    tag: str
    text: str
    trust: str
    session_id: str | None = None
    fate: str | None = None
    """None while active; why it was archived otherwise."""
    note: str | None = None

    @property
    def link(self) -> str:
        return f"quipu://memories/{self.memory_id}?version={self.version}"

    def line(self) -> str:
        label = "" if self.trust == VERIFIED else f" [{self.trust}]"
        text = " ".join(self.text.split())
        if self.fate is not None:
            why = self.fate if self.note is None else f"{self.fate}: {self.note}"
            if text == f"({self.fate})":
                return f"{self.date} [{self.tag}] ({why}) ({self.link})"
            return f"{self.date} [{self.tag}]{label} {text} ({why}) ({self.link})"
        return f"{self.date} [{self.tag}]{label} {text} ({self.link})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "version": self.version,
            "date": self.date,
            "tag": self.tag,
            "text": self.text,
            "trust": self.trust,
            "session_id": self.session_id,
            "fate": self.fate,
            "note": self.note,
            "link": self.link,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexEntry:
        return cls(
            memory_id=str(data["memory_id"]),
            version=int(data["version"]),
            date=str(data["date"]),
            tag=str(data["tag"]),
            text=str(data["text"]),
            trust=str(data["trust"]),
            session_id=data.get("session_id"),
            fate=data.get("fate"),
            note=data.get("note"),
        )


@dataclass(frozen=True)
class MemoryIndex:
    """One version of a scope's index. ``source_mark`` is the newest memory write it saw."""

    ref: ScopeRef
    version: int
    built_at: datetime
    source_mark: datetime | None
    active: tuple[IndexEntry, ...]
    archive: tuple[IndexEntry, ...] = ()
    reason: str | None = None
    expired: tuple[str, ...] = field(default=())
    """Memory ids this rewrite expired (CONSOL-5)."""

    def lines(self, max_lines: int = MAX_LINES) -> list[str]:
        """The rendered index: header, active lines, ``## Archive`` and as many archived lines
        as fit in ``max_lines`` (the newest first; the rest stay in earlier versions)."""
        head = (
            f"# Memory index ({self.ref.scope.value}) v{self.version}:"
            f" {len(self.active)} active, {len(self.archive)} archived"
        )
        out = [head, *(f"- {e.line()}" for e in self.active), "## Archive"]
        room = max(0, max_lines - len(out))
        out.extend(f"- {e.line()}" for e in self.archive[:room])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.ref.scope.value,
            "version": self.version,
            "built_at": self.built_at.isoformat(),
            "source_mark": None if self.source_mark is None else self.source_mark.isoformat(),
            "active": [e.to_dict() for e in self.active],
            "archive": [e.to_dict() for e in self.archive],
            "reason": self.reason,
            "expired": list(self.expired),
        }


def tag_of(memory: MemoryVersion) -> str:
    """The provenance tag of a memory, as latch-memory names them: ``user-requested`` for an
    explicit write, else who said it in the turn or span it came from (``user-said``,
    ``assistant-said``, ``tool-derived``); ``graduated`` and ``imported`` for those sources."""
    if memory.source is Source.EXPLICIT:
        return "user-requested"
    if memory.source is Source.GRADUATED:
        return "graduated"
    if memory.source is Source.IMPORTED:
        return "imported"
    role = memory.metadata.get("role")
    if role in ("tool", "function"):
        return "tool-derived"
    if role == "assistant":
        return "assistant-said"
    return "user-said"


def entry_of(memory: MemoryVersion, trust: str) -> IndexEntry:
    at = memory.observed_at or memory.valid_at
    return IndexEntry(
        memory_id=memory.id,
        version=memory.version,
        date=at.date().isoformat(),
        tag=tag_of(memory),
        text=memory.text,
        trust=trust,
        session_id=memory.provenance.session_id,
    )


def trust_labels(facts: Sequence[MemoryVersion]) -> dict[str, str]:
    """Each fact's label (CONSOL-3): verified when its trust is verified (an explicit write, a
    reviewer's affirm or an independent write corroborated it), ``corroborated`` when the same
    statement came from two different sessions, ``unverified`` otherwise."""
    sessions: dict[str, set[str]] = {}
    for m in facts:
        if m.provenance.session_id is not None:
            sessions.setdefault(fold(m.text), set()).add(m.provenance.session_id)
    labels: dict[str, str] = {}
    for m in facts:
        if m.trust is Trust.VERIFIED:
            labels[m.id] = VERIFIED
        elif len(sessions.get(fold(m.text), ())) >= 2:
            labels[m.id] = CORROBORATED
        else:
            labels[m.id] = UNVERIFIED
    return labels


def fate_of(current: MemoryVersion | None) -> tuple[str, str | None]:
    """Why a formerly active family left the active set, from its current version."""
    if current is None:
        return LEFT, None
    if current.status is Status.SUPERSEDED:
        return SUPERSEDED, None if current.related_id is None else f"by {current.related_id}"
    if current.status is Status.EXPIRED:
        return EXPIRED, current.reason
    if current.status is Status.UNAVAILABLE:
        return FORGOTTEN, None
    if current.status is Status.ERASED:
        return ERASED, None
    return LEFT, current.status.value


def compile_entries(
    previous: MemoryIndex | None,
    facts: Sequence[MemoryVersion],
    fates: Mapping[str, MemoryVersion | None],
    *,
    max_lines: int = MAX_LINES,
) -> tuple[tuple[IndexEntry, ...], tuple[IndexEntry, ...]]:
    """The next (active, archive) of an index from the scope's active ``facts`` and the
    current version of every family the previous version had active (``fates``).

    Active: verified first, then the newest, at most ``max_lines`` minus the frame; the rest
    are archived as ``over_capacity``. Formerly active entries that left are archived with
    their fate; a forgotten, erased or withdrawn memory's text never reaches the archive."""
    labels = trust_labels(facts)
    ranked = sorted(
        facts,
        key=lambda m: (labels[m.id] == UNVERIFIED, -(m.observed_at or m.valid_at).timestamp()),
    )
    room = max(0, max_lines - _FRAME_LINES)
    chosen = ranked[:room]
    chosen.sort(key=lambda m: (m.observed_at or m.valid_at, m.recorded_at, m.id), reverse=True)
    active = tuple(entry_of(m, labels[m.id]) for m in chosen)
    shown = {e.memory_id for e in active}
    archived: list[IndexEntry] = [
        replace(entry_of(m, labels[m.id]), fate=OVER_CAPACITY) for m in ranked[room:]
    ]
    if previous is not None:
        for old in previous.active:
            if old.memory_id in shown or any(a.memory_id == old.memory_id for a in archived):
                continue
            fate, note = fate_of(fates.get(old.memory_id))
            text = old.text if fate in _KEEPS_TEXT else f"({fate})"
            archived.append(replace(old, fate=fate, note=note, text=text))
    seen = shown | {a.memory_id for a in archived}
    if previous is not None:
        for old in previous.archive:
            if old.memory_id not in seen:
                gone = fates.get(old.memory_id)
                if gone is not None and gone.status in (Status.ERASED, Status.UNAVAILABLE):
                    fate = fate_of(gone)[0]
                    old = replace(old, text=f"({fate})", fate=fate, note=None)  # noqa: PLW2901
                archived.append(old)
                seen.add(old.memory_id)
    return active, tuple(archived[:MAX_ARCHIVE])


def validate_rewrite(
    previous: MemoryIndex | None,
    active: Sequence[IndexEntry],
    archive: Sequence[IndexEntry],
    *,
    max_lines: int = MAX_LINES,
) -> None:
    """Refuse a rewrite that drops a previously active entry or shows too many (CONSOL-2).

    Raises :class:`IndexEntryDropped` (409 ``index_entry_dropped``, the ids in ``details``)
    or :class:`IndexTooLong` (409 ``index_too_long``)."""
    if len(active) + _FRAME_LINES > max_lines:
        raise IndexTooLong(
            f"an index shows at most {max_lines - _FRAME_LINES} active entries",
            details={"active": len(active), "max_lines": max_lines},
        )
    ids = [e.memory_id for e in active]
    if len(set(ids)) != len(ids):
        raise IndexEntryDropped(
            "an index lists each memory once", details={"duplicates": _dupes(ids)}
        )
    if previous is None:
        return
    kept = set(ids) | {e.memory_id for e in archive}
    dropped = [e.memory_id for e in previous.active if e.memory_id not in kept]
    if dropped:
        raise IndexEntryDropped(
            "the rewrite drops entries that were active without archiving them",
            details={"dropped": dropped[:50], "previous_version": previous.version},
        )


def _dupes(ids: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    twice: list[str] = []
    for i in ids:
        if i in seen and i not in twice:
            twice.append(i)
        seen.add(i)
    return twice


def diff(older: MemoryIndex, newer: MemoryIndex) -> dict[str, Any]:
    """What changed between two versions of one index, by memory family."""
    before = {e.memory_id: e for e in older.active}
    after = {e.memory_id: e for e in newer.active}
    archived_now = {e.memory_id: e for e in newer.archive}
    return {
        "from_version": older.version,
        "to_version": newer.version,
        "added": [after[i].to_dict() for i in after if i not in before],
        "archived": [
            archived_now[i].to_dict() for i in before if i not in after and i in archived_now
        ],
        "removed": [
            before[i].to_dict() for i in before if i not in after and i not in archived_now
        ],
        "changed": [
            {"from": before[i].to_dict(), "to": after[i].to_dict()}
            for i in after
            if i in before and before[i] != after[i]
        ],
    }


def expiring(
    active: Sequence[IndexEntry],
    last_recalled: Mapping[str, datetime | None],
    written: Mapping[str, datetime],
    cutoff: datetime,
) -> list[str]:
    """The unverified entries to expire (CONSOL-5): not recalled since ``cutoff`` and written
    before it (a fact younger than the window has had no chance to be recalled yet)."""
    out: list[str] = []
    for e in active:
        if e.trust != UNVERIFIED:
            continue
        seen = last_recalled.get(e.memory_id)
        if (seen is None or seen < cutoff) and written.get(e.memory_id, cutoff) < cutoff:
            out.append(e.memory_id)
    return out


def dump_body(index: MemoryIndex) -> str:
    """The stored JSON of a version's entries (the stores keep the scalar fields in columns)."""
    return json.dumps(
        {
            "active": [e.to_dict() for e in index.active],
            "archive": [e.to_dict() for e in index.archive],
            "expired": list(index.expired),
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def load_index(
    ref: ScopeRef,
    version: int,
    built_at: datetime,
    source_mark: datetime | None,
    reason: str | None,
    body: Mapping[str, Any],
) -> MemoryIndex:
    """A stored version back from its columns and its decoded JSON body."""
    return MemoryIndex(
        ref=ref,
        version=version,
        built_at=built_at,
        source_mark=source_mark,
        active=tuple(IndexEntry.from_dict(e) for e in body.get("active", ())),
        archive=tuple(IndexEntry.from_dict(e) for e in body.get("archive", ())),
        reason=reason,
        expired=tuple(str(i) for i in body.get("expired", ())),
    )


def check_next(previous: MemoryIndex | None, index: MemoryIndex) -> None:
    """The store's check inside its write transaction: the version follows the current one
    (409 ``version_conflict``: another rewrite won) and the rewrite drops nothing."""
    expected = 1 if previous is None else previous.version + 1
    if index.version != expected:
        raise Conflict(
            f"index version {index.version} does not follow the current one",
            code="version_conflict",
            details={"expected": expected, "got": index.version},
        )
    validate_rewrite(previous, index.active, index.archive)


def redacted_body(body: Mapping[str, Any], memory_ids: frozenset[str]) -> dict[str, Any] | None:
    """A stored version's body with the text of ``memory_ids``' entries replaced by
    ``(erased)`` (LIFE-4: an erased memory's words leave every kept version too); None when
    no entry names one of them."""
    changed = False
    out: dict[str, Any] = dict(body)
    for part in ("active", "archive"):
        entries = []
        for entry in body.get(part, ()):
            if entry.get("memory_id") in memory_ids and entry.get("text") != "(erased)":
                entries.append({**entry, "text": "(erased)", "note": None})
                changed = True
            else:
                entries.append(entry)
        out[part] = entries
    return out if changed else None
