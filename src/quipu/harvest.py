"""Harvest (HARVEST-1): a caller hands over the spans its context window is about to lose — at a
compaction cut, a recap boundary or a stateful boundary — and they become memories later.

- :meth:`Harvester.harvest` checks the spans and the caller's right to write the scope, puts
  them on a bounded queue as ONE batch and answers at once (202 over HTTP). A full queue drops
  the batch: the answer says so (``accepted: false``, ``reason: queue_full``) and the drop is
  counted; the caller is never failed or slowed.
- One daemon thread extracts each batch **whole**: the spans, in order, are one window for the
  extractor, so a reference in span 3 resolves with what span 1 said ("My sister Ana…" …
  "She moved to Porto" → "User's sister Ana moved to Porto"). The facts are written as
  ``harvested`` memories (trust ``unverified``) with the boundary and span in their metadata.
  A store outage or a failed extraction drops the batch with a counted reason.

Counts are kept here (:meth:`Harvester.stats`) and, when a surface sets :attr:`observer`,
reported to it (the HTTP server counts them in ``quipu_harvest_batches_total``).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from quipu.core import validate
from quipu.core.records import Principal, ScopeRef
from quipu.core.scopes import check_write, resolve_scope
from quipu.errors import InvalidInput, QuipuError
from quipu.extraction.base import Extractor, Turn
from quipu.memories import MemoryService

log = logging.getLogger("quipu.harvest")

BOUNDARIES = ("compaction", "recap", "stateful")
#: Most spans in one batch, and most characters in one span.
MAX_SPANS = 64
MAX_SPAN_CHARS = 32_000
ROLES = ("user", "assistant", "tool", "system")


@dataclass(frozen=True)
class Span:
    """One evicted piece of context: who said it and what."""

    role: str
    content: str


@dataclass(frozen=True)
class Receipt:
    """The answer to a harvest: queued or dropped (with why), never an error for load."""

    batch_id: str
    accepted: bool
    spans: int
    boundary: str
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "accepted": self.accepted,
            "spans": self.spans,
            "boundary": self.boundary,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class _Batch:
    batch_id: str
    principal: Principal
    ref: ScopeRef
    boundary: str
    session_id: str | None
    spans: tuple[Span, ...]
    at: datetime


def spans_of(value: object) -> tuple[Span, ...]:
    """The spans of a request: a list of strings (user turns) or of ``{role, content}``
    objects; 1..64 spans of 1..32,000 characters. 422 ``invalid_spans`` otherwise."""
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= MAX_SPANS:
        raise _bad(f"spans must be a list of 1 to {MAX_SPANS} spans")
    out: list[Span] = []
    for i, item in enumerate(value):
        role: object = "user"
        content: object = item
        if isinstance(item, dict):
            role, content = item.get("role", "user"), item.get("content")
            extra = set(item) - {"role", "content"}
            if extra:
                raise _bad(f"span {i} has unknown fields", field=f"spans[{i}]")
        if role not in ROLES:
            raise _bad(f"span {i}: role must be one of {', '.join(ROLES)}", field=f"spans[{i}]")
        if not isinstance(content, str) or not content.strip() or len(content) > MAX_SPAN_CHARS:
            raise _bad(
                f"span {i}: content must be text of 1 to {MAX_SPAN_CHARS} characters",
                field=f"spans[{i}]",
            )
        out.append(Span(str(role), validate.clean_string(content, f"spans[{i}]")))
    return tuple(out)


def _bad(message: str, *, field: str = "spans") -> InvalidInput:
    return InvalidInput(message, code="invalid_spans", details={"field": field})


class Harvester:
    """The bounded harvest queue and its extraction thread (see the module docstring)."""

    def __init__(
        self,
        memory: MemoryService,
        extractor: Extractor,
        *,
        capacity: int = 64,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.memory = memory.for_jobs()
        self.extractor = extractor
        self.capacity = capacity
        self._queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=capacity)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        #: Told of each outcome (``accepted``, ``extracted``, ``dropped``) and its reason.
        self.observer: Callable[[str, str], None] | None = None

    # -- the caller's side -------------------------------------------------------------------
    def harvest(
        self,
        principal: Principal,
        spans: object,
        *,
        boundary: object = "compaction",
        scope: str = "agent",
        session_id: object = None,
    ) -> Receipt:
        """Queue ``spans`` as one batch for extraction into ``scope``. Bad input is 422
        (``invalid_spans``, ``invalid_boundary``); a full queue is an answer, not an error."""
        if boundary not in BOUNDARIES:
            raise InvalidInput(
                f"boundary must be one of {', '.join(BOUNDARIES)}",
                code="invalid_boundary",
                details={"field": "boundary"},
            )
        parsed = spans_of(spans)
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        batch = _Batch(
            batch_id=uuid.uuid4().hex,
            principal=principal,
            ref=ref,
            boundary=str(boundary),
            session_id=validate.optional_id(session_id, field="session_id"),
            spans=parsed,
            at=self._clock(),
        )
        self._ensure_thread()
        try:
            self._queue.put_nowait(batch)
        except queue.Full:
            self._count("dropped", "queue_full")
            return Receipt(batch.batch_id, False, len(parsed), batch.boundary, "queue_full")
        self._count("accepted", batch.boundary)
        return Receipt(batch.batch_id, True, len(parsed), batch.boundary)

    def stats(self) -> dict[str, Any]:
        """What the harvest did in this process: counts by outcome and reason, and the queue."""
        with self._lock:
            counts = dict(self._counts)
        return {"queued": self._queue.qsize(), "capacity": self.capacity, "counts": counts}

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued batch was handled (tests, shutdown); False on timeout."""
        with self._idle:
            return self._idle.wait_for(
                lambda: self._queue.unfinished_tasks == 0 and self._busy == 0, timeout
            )

    def close(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=1.0)
            thread.join(timeout=5.0)

    # -- the extraction thread ---------------------------------------------------------------
    def extract(self, spans: Sequence[Span]) -> list[tuple[int, Any]]:
        """The whole batch as one window: (span index, candidate) for every fact found."""
        turns = [Turn(role=s.role, content=s.content, seq=i) for i, s in enumerate(spans)]
        result = self.extractor.run(turns)
        result.raise_for_failure()
        return [(c.turn_seq, c) for c in result.candidates]

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="quipu-harvest", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is None:
                    return
                with self._lock:
                    self._busy += 1
                self._handle(batch)
            finally:
                self._queue.task_done()
                with self._idle:
                    if batch is not None:
                        self._busy -= 1
                    self._idle.notify_all()

    def _handle(self, batch: _Batch) -> None:
        try:
            found = self.extract(batch.spans)
        except QuipuError as exc:
            self._count("dropped", "extraction_failed")
            log.warning("harvest batch %s dropped: %s", batch.batch_id, exc.code)
            return
        written = 0
        for index, candidate in found:
            try:
                result = self.memory.remember(
                    batch.principal,
                    candidate.text,
                    scope=batch.ref.scope.value,
                    kind=candidate.kind.value,
                    confidence=candidate.confidence,
                    source="harvested",
                    session_id=batch.session_id,
                    quote=candidate.quote or None,
                    observed_at=batch.at,
                    metadata={
                        "boundary": batch.boundary,
                        "span": index,
                        "role": batch.spans[index].role,
                        "batch_id": batch.batch_id,
                    },
                )
            except QuipuError as exc:
                if exc.transient:  # the store is out: the rest of the batch would fail too
                    self._count("dropped", "store_unavailable")
                    log.warning("harvest batch %s dropped: %s", batch.batch_id, exc.code)
                    return
                self._count("refused", exc.code)
                continue
            except Exception as exc:
                self._count("dropped", "store_unavailable")
                log.warning("harvest batch %s dropped: %s", batch.batch_id, type(exc).__name__)
                return
            written += int(result.created)
        self._count("extracted", batch.boundary)
        with self._lock:
            self._counts["facts:written"] += written

    def _count(self, outcome: str, reason: str, n: int = 1) -> None:
        with self._lock:
            self._counts[f"{outcome}:{reason}"] += n
        if self.observer is not None:
            self.observer(outcome, reason)
