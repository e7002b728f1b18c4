"""Query objects shared by the service, retrieval and the stores. Pure data."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quipu.core.records import Kind, MemoryVersion, Source, Status
from quipu.errors import InvalidInput


@dataclass(frozen=True)
class Filters:
    """Row filters applied after candidates are found (RECALL-1) and by list.

    ``tags`` must all be present on a row. ``project`` selects the global partition plus that
    project; ``None`` selects the global partition only (SCOPE-6). ``as_of`` switches from the
    current versions to the versions valid at that instant (MEM-2).
    """

    statuses: frozenset[Status] = frozenset({Status.ACTIVE})
    as_of: datetime | None = None
    observed_after: datetime | None = None
    observed_before: datetime | None = None
    kinds: frozenset[Kind] = frozenset()
    tags: frozenset[str] = frozenset()
    sources: frozenset[Source] = frozenset()
    min_confidence: float | None = None
    project: str | None = None

    def accepts(self, memory: MemoryVersion) -> bool:
        """The same predicate the stores apply in their own dialect; used to re-check rows."""
        if memory.status not in self.statuses and self.as_of is None:
            return False
        if memory.project is not None and memory.project != self.project:
            return False
        if self.kinds and memory.kind not in self.kinds:
            return False
        if self.sources and memory.source not in self.sources:
            return False
        if self.tags and not self.tags.issubset(memory.tags):
            return False
        if self.min_confidence is not None and memory.confidence < self.min_confidence:
            return False
        if self.observed_after is not None and (
            memory.observed_at is None or memory.observed_at < self.observed_after
        ):
            return False
        return not (
            self.observed_before is not None
            and (memory.observed_at is None or memory.observed_at >= self.observed_before)
        )


@dataclass(frozen=True)
class Candidate:
    """One row a retriever found: the version's storage key and the retriever's raw score."""

    key: int
    score: float


@dataclass(frozen=True)
class Page:
    items: list[MemoryVersion]
    next_cursor: str | None


@dataclass(frozen=True)
class Cursor:
    """Keyset position in a list ordered by (recorded_at desc, id desc)."""

    recorded_at: str
    id: str

    def encode(self) -> str:
        raw = json.dumps([self.recorded_at, self.id]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            padded = token + "=" * (-len(token) % 4)
            recorded_at, ident = json.loads(base64.urlsafe_b64decode(padded))
            if not isinstance(recorded_at, str) or not isinstance(ident, str):
                raise ValueError
        except (ValueError, TypeError, json.JSONDecodeError):
            raise InvalidInput(
                "the cursor is not one this server issued", code="invalid_cursor"
            ) from None
        return cls(recorded_at, ident)


@dataclass(frozen=True)
class Hit:
    memory: MemoryVersion
    score: float
    rank: int
    matched: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory": self.memory.to_dict(),
            "score": round(self.score, 6),
            "rank": self.rank,
            "kind": self.memory.kind.value,
            "matched": list(self.matched),
        }


@dataclass(frozen=True)
class RecallResult:
    """The one envelope every read returns (RECALL-3)."""

    results: list[Hit]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"results": [h.to_dict() for h in self.results], "meta": self.meta}

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)
