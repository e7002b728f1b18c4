"""The one seam every extractor implements, and the types it speaks (PROMO-3).

An :class:`Extractor` reads a window of session :class:`Turn` objects and proposes
:class:`Candidate` memories: standalone text, a kind, a confidence, and the exact span of
the user turn it came from. It writes nothing; gating (confidence threshold, cap),
de-duplication and storage belong to the promotion job.

Failure is a value, not an exception. :meth:`Extractor.run` always returns an
:class:`ExtractionResult`; when the extractor could not produce a trustworthy answer
(an endpoint timed out, the model answered malformed or schema-violating JSON) the result
carries an :class:`ExtractionFailure` and **zero** candidates — never a half result. The
job layer records a failed result as a failed, retryable attempt; code that prefers an
exception calls :meth:`ExtractionResult.raise_for_failure`, which raises the transient
:class:`ExtractionFailed`. :meth:`Extractor.extract` is the plain list of candidates and
never raises on bad model output.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from quipu.core.records import Kind
from quipu.errors import Unavailable

__all__ = [
    "Candidate",
    "ExtractionFailed",
    "ExtractionFailure",
    "ExtractionResult",
    "Extractor",
    "Turn",
]

USER_ROLE = "user"


@dataclass(frozen=True)
class Turn:
    """One session turn as the extractor sees it. ``seq`` is its position in the session."""

    role: str
    content: str
    seq: int
    at: datetime | None = None

    @property
    def is_user(self) -> bool:
        return self.role.strip().lower() in (USER_ROLE, "human")


@dataclass(frozen=True)
class Candidate:
    """A proposed long-term memory.

    ``text`` is standalone (first person rewritten, e.g. "User lives in Lisbon").
    ``quote`` is the source span: ``content[quote_start:quote_end]`` of the turn whose
    ``seq`` is ``turn_seq``. ``supersedes_hint`` says what a correction replaces (the
    earlier statement or the old value, e.g. "User lives in Lisbon" or "Lisbon"); the
    promotion job uses it to find the memory to supersede. ``links`` are memory ids the
    candidate refers to, already checked against the ids the caller allowed (SAFE-3).
    ``slot`` names the single-valued attribute the candidate states (``live``, ``work``,
    ``my:manager:is:NAME``): a later statement about the same slot replaces it, within a
    session and, through promotion, across sessions (None: not single-valued).
    """

    text: str
    kind: Kind
    confidence: float
    quote: str
    quote_start: int
    quote_end: int
    turn_seq: int
    supersedes_hint: str | None = None
    links: tuple[str, ...] = ()
    slot: str | None = None

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("candidate text must not be empty")
        if not isinstance(self.kind, Kind):
            raise TypeError(f"kind must be a Kind, got {type(self.kind).__name__}")
        if not (math.isfinite(self.confidence) and 0.0 <= self.confidence <= 1.0):
            raise ValueError(f"confidence must be within 0..1, got {self.confidence!r}")
        if not 0 <= self.quote_start <= self.quote_end:
            raise ValueError(f"bad quote span {self.quote_start}..{self.quote_end}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "kind": self.kind.value,
            "confidence": self.confidence,
            "quote": self.quote,
            "quote_start": self.quote_start,
            "quote_end": self.quote_end,
            "turn_seq": self.turn_seq,
            "supersedes_hint": self.supersedes_hint,
            "links": list(self.links),
            "slot": self.slot,
        }


@dataclass(frozen=True)
class ExtractionFailure:
    """Why an extraction produced nothing trustworthy.

    ``code`` is stable: ``timeout``, ``transport``, ``http_status``, ``malformed_json``,
    ``schema_violation``, ``refusal``, ``truncated``. ``retryable`` is False only when
    retrying the same call cannot help (the endpoint refused the credential or the model).
    ``message`` never holds the API key.
    """

    code: str
    message: str
    retryable: bool = True


class ExtractionFailed(Unavailable):
    """An extraction failed; the job may retry it (see :class:`ExtractionFailure`)."""

    default_code = "extraction_failed"


def _frozen_counts(counts: Mapping[str, int] | None) -> Mapping[str, int]:
    return MappingProxyType(dict(counts or {}))


@dataclass(frozen=True)
class ExtractionResult:
    """What one extraction run produced.

    ``dropped`` counts candidates or spans left out on purpose, by reason (``injection``,
    ``secret``, ``ungrounded_quote``, ``foreign_link`` …), so a report can show them.
    ``model`` and ``prompt_version`` are set by model-backed extractors (MEM-3).
    """

    extractor_id: str
    version: str
    candidates: tuple[Candidate, ...] = ()
    failure: ExtractionFailure | None = None
    dropped: Mapping[str, int] = field(default_factory=lambda: _frozen_counts(None))
    model: str | None = None
    prompt_version: str | None = None

    def __post_init__(self) -> None:
        if self.failure is not None and self.candidates:
            raise ValueError("a failed extraction carries no candidates")
        object.__setattr__(self, "dropped", _frozen_counts(self.dropped))

    @property
    def ok(self) -> bool:
        return self.failure is None

    def raise_for_failure(self) -> None:
        """Raise :class:`ExtractionFailed` when this run failed; do nothing otherwise."""
        if self.failure is None:
            return
        raise ExtractionFailed(
            f"{self.extractor_id} {self.version}: {self.failure.message}",
            details={
                "reason": self.failure.code,
                "retryable": self.failure.retryable,
                "extractor": self.extractor_id,
                "version": self.version,
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "extractor_id": self.extractor_id,
            "version": self.version,
            "ok": self.ok,
            "candidates": [c.to_dict() for c in self.candidates],
            "failure": None
            if self.failure is None
            else {
                "code": self.failure.code,
                "message": self.failure.message,
                "retryable": self.failure.retryable,
            },
            "dropped": dict(self.dropped),
            "model": self.model,
            "prompt_version": self.prompt_version,
        }


class Extractor(abc.ABC):
    """Proposes long-term memories from a window of session turns.

    ``extractor_id`` names the implementation and ``version`` changes whenever its output
    for the same turns may change (rules, prompt, parser): together they enter the
    extraction idempotency key (CONSOL-4) and the provenance of promoted memories.
    ``uses_model`` is True when a run calls a model, so the promotion job reserves the
    tenant's hourly model budget before it (PROMO-5).
    """

    extractor_id: str
    version: str
    uses_model: bool = False

    @abc.abstractmethod
    def run(self, turns: Sequence[Turn], *, allowed_ids: Collection[str] = ()) -> ExtractionResult:
        """Extract from ``turns``; never raises on bad input or bad model output.

        ``allowed_ids`` are the memory ids the caller may see: any other id a candidate
        mentions is stripped (SAFE-3).
        """

    def extract(
        self, turns: Sequence[Turn], *, allowed_ids: Collection[str] = ()
    ) -> list[Candidate]:
        """The candidates of :meth:`run`: empty when the run failed."""
        return list(self.run(turns, allowed_ids=allowed_ids).candidates)
