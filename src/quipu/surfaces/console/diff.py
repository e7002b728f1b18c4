"""Word-level differences between two versions' texts, for the memory page. Pure."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import datetime

from quipu.core.records import MemoryVersion

_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    """A run of text that is kept (``same``), added (``added``) or removed (``removed``)."""

    op: str
    text: str


def word_diff(before: str, after: str) -> list[Segment]:
    """The segments that turn ``before`` into ``after``, word by word (whitespace kept)."""
    old = _TOKENS.findall(before)
    new = _TOKENS.findall(after)
    out: list[Segment] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.append(Segment("same", "".join(old[i1:i2])))
            continue
        if i2 > i1:
            out.append(Segment("removed", "".join(old[i1:i2])))
        if j2 > j1:
            out.append(Segment("added", "".join(new[j1:j2])))
    return out


def changed_fields(before: MemoryVersion | None, after: MemoryVersion) -> list[str]:
    """The names of the fields a version changed besides its text (status, kind, tags...)."""
    if before is None:
        return []
    names = ("status", "kind", "trust", "confidence", "tags", "aliases", "metadata", "invalid_at")
    return [n for n in names if getattr(before, n) != getattr(after, n)]


def version_at(versions: list[MemoryVersion], at: datetime | None) -> MemoryVersion | None:
    """The version that was current at ``at`` (recorded at or before it), or the latest when
    ``at`` is None; None when the memory did not exist yet."""
    if at is None:
        return versions[-1] if versions else None
    found = None
    for version in versions:
        if version.recorded_at <= at:
            found = version
    return found
