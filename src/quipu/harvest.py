"""Harvest (HARVEST-1): a caller hands over the spans its context window is about to lose — at a
compaction cut, a recap boundary or a stateful boundary — and they become memories later.

- :meth:`Harvester.harvest` checks the spans, the caller's right to write the scope and the
  secret screen (SAFE-1: a span holding a secret is refused, 422 ``secret_detected``, before
  anything is stored), then persists the batch as ONE durable job (kind
  :data:`HARVEST_BATCH`) and answers at once (202 over HTTP). The batch survives a restart:
  whichever worker runs next (`quipu serve`, `quipu worker`, the embedded thread) extracts it.
- The queue is bounded per tenant and scope owner: with ``capacity`` batches of that scope
  already waiting, the batch is dropped — the answer says so (``accepted: false``,
  ``reason: queue_full``) and the drop is counted. A store that fails or does not answer
  within ``accept_timeout`` drops the batch too (``store_unavailable``, counted; a late
  enqueue is cancelled), and for a few seconds after, batches are dropped without touching the
  store: the caller is never failed or slowed.
- A job extracts its batch **whole**: the spans, in order, are one window for the extractor,
  so a reference in span 3 resolves with what span 1 said ("My sister Ana…" … "She moved to
  Porto" → "User's sister Ana moved to Porto"); relative dates resolve against the time the
  batch was handed over. The facts are written as ``harvested`` memories (trust
  ``unverified``) with the boundary, span and batch id in their metadata. A re-run of the
  job (a worker died mid-batch) resumes after the last fact it wrote (the job's checkpoint)
  and never writes a fact of the batch twice. A store outage while extracting is a retry with
  backoff; the batch is dropped (counted) only when the job's attempts are spent.

Counts are kept here (:meth:`Harvester.stats`) and, when a surface sets :attr:`observer`,
reported to it (the HTTP server counts them in ``quipu_harvest_batches_total``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from quipu.core import validate
from quipu.core.jobs import Job, NewJob
from quipu.core.records import Principal, Role, ScopeRef, Source
from quipu.core.scopes import check_write, resolve_scope
from quipu.core.sessions import session_owner
from quipu.core.text import content_hash, fold
from quipu.errors import InvalidInput, QuipuError
from quipu.extraction.base import Extractor, Turn
from quipu.jobs.queue import JobQueue, Lease
from quipu.jobs.worker import Retryable, Worker
from quipu.memories import MemoryService
from quipu.safety import find_secrets, scrub_secrets, secret_error
from quipu.safety.fields import FieldFinding

log = logging.getLogger("quipu.harvest")

#: The durable job kind of one harvested batch.
HARVEST_BATCH = "harvest_batch"
#: After a store outage at accept time, batches are dropped without trying the store for this
#: many seconds (a dead database must not slow every caller by its connect timeout).
OUTAGE_PAUSE = 5.0
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
    """The durable, bounded harvest queue and its job handler (see the module docstring).

    ``queue``: the runtime's job queue (default: one over the memory service's store).
    ``run_jobs``: run harvest jobs on this object's own thread, woken by each accepted batch
    (a harvester without a runtime worker); the runtime turns it off and registers
    :meth:`run` with its worker instead."""

    def __init__(
        self,
        memory: MemoryService,
        extractor: Extractor,
        *,
        capacity: int = 64,
        queue: JobQueue | None = None,
        run_jobs: bool = True,
        accept_timeout: float = 2.0,
        max_attempts: int = 5,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.memory = memory.for_jobs()
        self.store = memory.store
        self.extractor = extractor
        self.capacity = capacity
        self.queue = queue or JobQueue(memory.store, clock=clock)
        self.run_jobs = run_jobs
        self.accept_timeout = accept_timeout
        self.max_attempts = max_attempts
        self._clock = clock or (lambda: datetime.now(UTC))
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._outage_until = 0.0
        self._worker = Worker(self.queue, {HARVEST_BATCH: self.run}, name=f"harvest:{id(self):x}")
        self._thread: threading.Thread | None = None
        self._kick = threading.Event()
        self._closing = threading.Event()
        #: Told of each outcome (``accepted``, ``extracted``, ``dropped``, ``refused``,
        #: ``retried``) and its reason.
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
        """Queue ``spans`` as one durable batch for extraction into ``scope``. Bad input is
        422 (``invalid_spans``, ``invalid_boundary``, ``secret_detected``); a full queue or an
        unavailable store is an answer (``accepted: false``), not an error."""
        if boundary not in BOUNDARIES:
            raise InvalidInput(
                f"boundary must be one of {', '.join(BOUNDARIES)}",
                code="invalid_boundary",
                details={"field": "boundary"},
            )
        parsed = spans_of(spans)
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        session = validate.optional_id(session_id, field="session_id")
        findings = [
            FieldFinding(f.kind, f.start, f.end, field=f"spans[{i}]")
            for i, span in enumerate(parsed)
            for f in find_secrets(span.content)
        ]
        if findings:  # SAFE-1: the spans are persisted in the job: screened like any write
            self._count("refused", "secret_detected")
            raise secret_error(findings)
        batch_id = uuid.uuid4().hex
        group = _group(ref)
        job = NewJob(
            principal.tenant_id,
            HARVEST_BATCH,
            group + batch_id,
            _payload(principal, ref, str(boundary), session, parsed, batch_id, self._clock()),
            max_attempts=self.max_attempts,
        )
        reason = self._enqueue(job, group)
        if reason is not None:
            self._count("dropped", reason)
            return Receipt(batch_id, False, len(parsed), str(boundary), reason)
        self._count("accepted", str(boundary))
        if self.run_jobs:
            self._ensure_thread()
            self._kick.set()
        return Receipt(batch_id, True, len(parsed), str(boundary))

    def _enqueue(self, job: NewJob, group: str) -> str | None:
        """None when the batch is queued, else why it was dropped. The store is asked on a
        helper thread and waited for at most ``accept_timeout`` seconds; a late success is
        cancelled, so a batch answered as dropped is never extracted."""
        if time.monotonic() < self._outage_until:
            return "store_unavailable"
        done = threading.Event()
        gate = threading.Lock()
        box: dict[str, Any] = {}

        def put() -> None:
            try:
                found = self.store.enqueue_bounded_job(
                    job, self.queue.now(), group=group, cap=self.capacity
                )
            except Exception as exc:  # any failure of the store: an outage for the caller
                log.warning("harvest batch not queued: %s", type(exc).__name__)
                box["error"] = exc
                found = None
            with gate:
                box["job"] = found
                late = box.get("abandoned", False)
                done.set()
            if late and found is not None:
                try:
                    self.store.cancel_job(found.job_id, self.queue.now())
                except Exception:
                    log.warning("harvest batch %s answered dropped but queued", found.job_id)

        threading.Thread(target=put, name="quipu-harvest-accept", daemon=True).start()
        if not done.wait(self.accept_timeout):
            with gate:
                if not done.is_set():
                    box["abandoned"] = True
        if box.get("abandoned") or "error" in box:
            self._outage_until = time.monotonic() + OUTAGE_PAUSE
            return "store_unavailable"
        return None if box.get("job") is not None else "queue_full"

    def stats(self) -> dict[str, Any]:
        """What the harvest did in this process (counts by outcome and reason), the batches
        waiting in the store (every tenant's; None when it cannot be read) and the bound."""
        with self._lock:
            counts = dict(self._counts)
        try:
            queued: int | None = self.store.count_active_jobs(HARVEST_BATCH)
        except Exception:
            queued = None
        return {"queued": queued, "capacity": self.capacity, "counts": counts}

    def drain(self, timeout: float = 30.0) -> bool:
        """Run every due harvest job here, then wait until no harvest job is queued or running
        (tests, `quipu worker --once`); False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            while self._worker.run_once() is not None:
                pass
            if self.store.count_active_jobs(HARVEST_BATCH) == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def close(self) -> None:
        self._closing.set()
        self._kick.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout=5.0)

    # -- the job -----------------------------------------------------------------------------
    def extract(self, spans: Sequence[Span], at: datetime | None = None) -> list[tuple[int, Any]]:
        """The whole batch as one window: (span index, candidate) for every fact found."""
        turns = [Turn(role=s.role, content=s.content, seq=i, at=at) for i, s in enumerate(spans)]
        result = self.extractor.run(turns)
        result.raise_for_failure()
        return [(c.turn_seq, c) for c in result.candidates]

    def run(self, lease: Lease) -> dict[str, Any]:
        """The handler of one :data:`HARVEST_BATCH` job: extract the batch whole and write its
        facts, resuming after the checkpoint of an earlier attempt."""
        job = lease.job
        batch = _Batch.of(job)
        try:
            found = self.extract(batch.spans, batch.at)
        except QuipuError as exc:
            if exc.transient and job.attempts < job.max_attempts:
                self._count("retried", "extraction_failed")
                raise Retryable(f"extraction failed: {exc.code}", code=exc.code) from None
            self._count("dropped", "extraction_failed")
            log.warning("harvest batch %s dropped: %s", batch.batch_id, exc.code)
            self._forget_spans(job)
            return {"outcome": "dropped", "reason": "extraction_failed", "spans": len(batch.spans)}
        start = int(job.checkpoint.get("next", 0))
        written = int(job.checkpoint.get("written", 0))
        counts = {"written": written, "duplicates": 0, "refused": 0}
        for n, (index, candidate) in enumerate(found):
            if n < start:
                continue
            try:
                created = self._write(batch, index, candidate)
            except QuipuError as exc:
                if not exc.transient:
                    self._count("refused", exc.code)
                    counts["refused"] += 1
                    continue
                self._outage(job, exc.code)
            except Exception as exc:
                self._outage(job, type(exc).__name__)
            counts["written" if created else "duplicates"] += 1
            lease.heartbeat({"next": n + 1, "written": counts["written"]})
        self._count("extracted", batch.boundary)
        with self._lock:
            self._counts["facts:written"] += counts["written"] - written
        self._forget_spans(job)
        return {"outcome": "extracted", "spans": len(batch.spans), "facts": len(found), **counts}

    def _forget_spans(self, job: Job) -> None:
        """The batch is done with: its spans (the caller's raw text) leave the job's payload,
        so no erase has to find them there later (LIFE-4); what was written from them is
        ordinary memory, which erase reaches."""
        self.store.job_text_erase(job.tenant_id, job_id=job.job_id)

    def _outage(self, job: Job, reason: str) -> NoReturn:
        """The store failed mid-batch: try the job again later while attempts remain (what was
        written stays written: the checkpoint), else drop the rest of the batch, counted."""
        if job.attempts < job.max_attempts:
            self._count("retried", "store_unavailable")
            raise Retryable(f"store unavailable: {reason}", code="store_unavailable")
        self._count("dropped", "store_unavailable")
        log.warning(
            "harvest job %s dropped after %d attempts: %s", job.job_id, job.attempts, reason
        )
        with contextlib.suppress(QuipuError):  # the store may still be down: best effort
            self._forget_spans(job)
        raise Retryable(f"store unavailable: {reason}", code="store_unavailable")

    def _write(self, batch: _Batch, index: int, candidate: Any) -> bool:
        """Write one fact of the batch; False when this batch already wrote it (any status)."""
        text, _ = scrub_secrets(candidate.text)
        quote, _ = scrub_secrets(candidate.quote or "")
        if self._written_before(batch, text):
            return False
        result = self.memory.remember(
            batch.principal,
            text,
            scope=batch.scope,
            kind=candidate.kind.value,
            confidence=candidate.confidence,
            source=Source.HARVESTED.value,
            session_id=batch.session_id,
            quote=quote or None,
            observed_at=batch.at,
            metadata={
                "boundary": batch.boundary,
                "span": index,
                "role": batch.spans[index].role,
                "batch_id": batch.batch_id,
            },
        )
        return result.created

    def _written_before(self, batch: _Batch, text: str) -> bool:
        """Whether this batch already wrote ``text`` into its scope (the idempotency key of a
        harvested fact: scope, batch id, normalised text), whatever its status now."""
        ref = resolve_scope(batch.principal, batch.scope)
        keys = [
            k
            for k, label in self.store.exact_candidates(ref, fold(text), content_hash(text))
            if label == "text"
        ]
        return any(
            row.source is Source.HARVESTED and row.metadata.get("batch_id") == batch.batch_id
            for row in self.store.load(keys).values()
        )

    # -- this harvester's own thread (no runtime worker) -------------------------------------
    def _ensure_thread(self) -> None:
        with self._lock:
            if self._closing.is_set():
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="quipu-harvest", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while not self._closing.is_set():
            self._kick.wait(5.0)
            self._kick.clear()
            try:
                while not self._closing.is_set() and self._worker.run_once() is not None:
                    pass
            except Exception:
                log.exception("harvest thread: a job run failed; continuing")

    def _count(self, outcome: str, reason: str, n: int = 1) -> None:
        with self._lock:
            self._counts[f"{outcome}:{reason}"] += n
        if self.observer is not None:
            self.observer(outcome, reason)


@dataclass(frozen=True)
class _Batch:
    """A harvest job's payload, read back."""

    batch_id: str
    principal: Principal
    scope: str
    boundary: str
    session_id: str | None
    spans: tuple[Span, ...]
    at: datetime

    @classmethod
    def of(cls, job: Job) -> _Batch:
        p = job.payload
        principal = Principal(
            tenant_id=job.tenant_id,
            key_id=p["key_id"],
            role=Role(p["role"]),
            agent_id=p.get("agent_id"),
            user_id=p.get("user_id"),
            grants=frozenset(p.get("grants", [])),
            surface=p.get("surface") or "harvest",
        )
        return cls(
            batch_id=p["batch_id"],
            principal=principal,
            scope=p["scope"],
            boundary=p["boundary"],
            session_id=p.get("session_id"),
            spans=tuple(Span(s["role"], s["content"]) for s in p["spans"]),
            at=datetime.fromisoformat(p["at"]),
        )


def _group(ref: ScopeRef) -> str:
    """The bound's group: one scope owner's batches (the job key is this plus the batch id)."""
    return f"{ref.scope.value}\x1f{ref.owner}\x1f"


def _payload(
    principal: Principal,
    ref: ScopeRef,
    boundary: str,
    session_id: str | None,
    spans: Sequence[Span],
    batch_id: str,
    at: datetime,
) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "owner": session_owner(principal),  # its caller may read the job (jobs/visibility.py)
        "key_id": principal.key_id,
        "role": principal.role.value,
        "agent_id": principal.agent_id,
        "user_id": principal.user_id,
        "surface": principal.surface,
        "grants": sorted(principal.grants),
        "scope": ref.scope.value,
        "boundary": boundary,
        "session_id": session_id,
        "at": at.isoformat(),
        "spans": [{"role": s.role, "content": s.content} for s in spans],
    }
