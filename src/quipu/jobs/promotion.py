"""Promotion: compile a session's turns into long-term memories with no remember call
(PROMO-1..6). Idempotent by session fingerprint; survivors gated by confidence and a cap,
scrubbed of secrets, embedded at write time; exact duplicates are no-ops; a near duplicate of an
earlier *promoted* memory supersedes it, never an explicit one.

Hardened by issue 20:

- The job's writes are not a caller's requests: the worker hands the promoter the memory
  service without the per-key request rate limit (#6). A transient refusal (rate limited,
  store busy, embedder down) ends the attempt as a retry, never as a dropped memory, and
  leaves the session to be promoted again; a quota refusal is counted (PROMO-5).
- Every outcome, a no-op and an early failure included, writes the session's watermark, so
  the sweep does not offer the same turns again in a loop (JOB-2, #15).
- A candidate this session already promoted is never written again, whatever that memory's
  status now (superseded, forgotten, quarantined): a re-run after a crash or a re-promotion
  never makes a second family (#14, PROMO-2). A planned supersede is recorded in the job's
  checkpoint before the write, so a re-run finishes it.
- A principal with a user and no agent (a ``user``-role key) promotes into its ``user``
  scope; one with no user into its ``agent`` scope (#15).
- A model compile is reserved from the tenant's budget only when one will run; a reservation
  the run did not use is given back (#15).

Issue 24 (promotion cost): a session's writes — its facts, supersedes, episodes and the
embedding job — are one store transaction, so a failure or a lost lease anywhere leaves none
of them and the retry writes the session once; the episodes go to the store in one batch
(:func:`quipu.memory_batch.remember_batch`), each record screened once.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.core.jobs import Job, NewJob
from quipu.core.query import Filters
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Principal,
    Role,
    ScopeRef,
    Source,
    Status,
    TurnRef,
)
from quipu.core.scopes import resolve_scope
from quipu.core.sessions import (
    FAILED,
    NOOP,
    OVER_BUDGET,
    PROMOTED,
    RETRY,
    SessionKey,
    SessionTurn,
    Watermark,
)
from quipu.core.text import content_hash, fold
from quipu.errors import LimitExceeded, QuipuError
from quipu.extraction.base import ExtractionResult, Extractor, Turn
from quipu.jobs.episodes import Episode, PrefetchedEmbedder, episodes_of, promotion_key
from quipu.jobs.queue import Lease, LeaseLost
from quipu.jobs.worker import SYSTEM_TENANT, Retryable
from quipu.memories import MemoryService
from quipu.memory_batch import NewMemory, remember_batch
from quipu.safety import scrub_secrets
from quipu.sessions import promotion_job
from quipu.storage.admission import clean_text, verdicts

#: The kinds a near-duplicate supersede may replace: every kind but ``episode``.
_FACT_KINDS = frozenset(k for k in Kind if k is not Kind.EPISODE)
#: Cosine similarity at which a new promoted memory replaces an earlier promoted one.
NEAR_DUPLICATE = 0.90
SUPERSEDE_REASON = "promotion: newer statement of the same fact"
SLOT_OLDER_REASON = "promotion: a newer statement of the same attribute was promoted before"
#: Promoted rows of one slot read when a new statement of it arrives (normally one is current).
_SLOT_ROWS = 20
#: The job kind that embeds rows stored without a vector (the worker's backfill).
EMBED_PENDING = "embed_pending"


@dataclass(frozen=True)
class PromotionConfig:
    min_confidence: float = 0.5
    max_candidates: int = 20
    scope: str = "agent_user"
    max_turns: int = 2000
    budget_per_hour: int = 0
    episodes: bool = True
    """Write each user and assistant turn verbatim as ``episode`` memories (issue 24)."""
    defer_episode_embedding: bool = True
    """Write episodes without a vector and enqueue :data:`EMBED_PENDING` to embed them in
    batches, instead of embedding every turn inside the promotion (issue 24, promotion cost)."""


def promotion_scope(configured: str, principal: Principal) -> str:
    """The scope a principal's promoted memories go to: the configured one when the principal
    can own it. ``agent_user`` needs an agent and a user: without a user it is ``agent``, and
    without an agent (a ``user``-role key) it is ``user``; ``user`` without a user is
    ``agent``."""
    if configured == "agent_user":
        if not principal.user_id:
            return "agent"
        if not principal.agent_id:
            return "user"
    if configured == "user" and not principal.user_id:
        return "agent"
    return configured


class Promoter:
    def __init__(
        self,
        memory: MemoryService,
        extractor: Extractor,
        config: PromotionConfig | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``memory``: the service the job writes through. The worker passes
        :meth:`MemoryService.for_jobs`, without the per-key request rate limit."""
        self.memory = memory
        self.store = memory.store
        self.extractor = extractor
        self.config = config or PromotionConfig()
        self._clock = clock or (lambda: datetime.now(UTC))

    def handle(self, lease: Lease) -> dict[str, Any]:
        job = lease.job
        key = SessionKey(job.tenant_id, job.payload["owner"], job.payload["session_id"])
        turns = self.store.session_turns(key, 0, self.config.max_turns, self._clock())
        extractor = f"{self.extractor.extractor_id}@{self.extractor.version}"
        fingerprint = promotion_key(turns, extractor, self.config.episodes)
        last_seq = turns[-1].seq if turns else 0
        try:
            status, outcome = self._promote(lease, key, turns, fingerprint)
        except LeaseLost:
            raise  # another worker holds the job now; it writes the marker
        except Exception as exc:
            # JOB-2: a failure advances the marker too. A transient one is a retry (the queue
            # backs off; the sweep offers the session again later), never "promoted".
            transient = _transient(exc)
            reason = exc.code if isinstance(exc, QuipuError) else type(exc).__name__
            self._mark(
                key, fingerprint, last_seq, RETRY if transient else FAILED, {"reason": reason}
            )
            if transient and isinstance(exc, QuipuError) and not exc.transient:
                raise Retryable(f"refused for now: {exc.message}", code=exc.code) from exc
            raise
        if status is not None:
            self._mark(key, fingerprint, last_seq, status, outcome)
        return outcome

    def _promote(
        self, lease: Lease, key: SessionKey, turns: list[SessionTurn], fingerprint: str
    ) -> tuple[str | None, dict[str, Any]]:
        """(the watermark status to record or None to keep the mark, the job's result)."""
        job = lease.job
        if len(turns) <= 1:
            self._give_back(job)
            return NOOP, {"outcome": NOOP, "turns": len(turns), "why": TOO_SHORT}
        mark = self.store.get_watermark(key)
        if mark is not None and mark.fingerprint == fingerprint and mark.status == PROMOTED:
            self._give_back(job)
            return None, {"outcome": "unchanged", "turns": len(turns)}
        if getattr(self.extractor, "uses_model", False) and not _holds_reservation(job):
            window = self._clock().replace(minute=0, second=0, microsecond=0)
            if not self.store.reserve_budget(key.tenant_id, window, self.config.budget_per_hour):
                return OVER_BUDGET, {"outcome": OVER_BUDGET, "turns": len(turns)}
        # A turn's relative dates resolve against when it was said (issue 24), not append time.
        result = self.extractor.run([Turn(t.role, t.content, t.seq, t.said_at) for t in turns])
        if result.failure is not None:
            if result.failure.retryable:
                raise Retryable(
                    f"extraction failed: {result.failure.message}", code=result.failure.code
                )
            return FAILED, {"outcome": "failed", "reason": result.failure.code}
        p = job.payload
        principal = Principal(
            tenant_id=job.tenant_id,
            key_id=p["key_id"],
            role=Role(p["role"]),
            agent_id=p.get("agent_id"),
            user_id=p.get("user_id"),
            grants=frozenset(p.get("grants", [])),
            surface="promotion",
        )
        counts = self._write(principal, key, result, lease, turns)
        return PROMOTED, {"outcome": PROMOTED, "turns": len(turns), **counts}

    def _write(
        self,
        principal: Principal,
        key: SessionKey,
        result: ExtractionResult,
        lease: Lease,
        turns: list[SessionTurn],
    ) -> dict[str, int]:
        """Write the surviving candidates, then the session's episodes. A memory's
        ``observed_at`` is its turn's time (MEM-2); its provenance names the turn."""
        said = {t.seq: t for t in turns}
        counts = {
            "candidates": len(result.candidates),
            "created": 0,
            "for_review": 0,
            "duplicates": 0,
            "superseded": 0,
            "below_confidence": 0,
            "over_cap": 0,
            "dropped_quota": 0,
            "rejected": 0,
            "episodes": 0,
            **{f"extractor_{k}": v for k, v in result.dropped.items()},
        }
        kept = [c for c in result.candidates if c.confidence >= self.config.min_confidence]
        counts["below_confidence"] = len(result.candidates) - len(kept)
        kept.sort(key=lambda c: -c.confidence)
        counts["over_cap"] = max(0, len(kept) - self.config.max_candidates)
        scope = promotion_scope(self.config.scope, principal)
        ref = resolve_scope(principal, scope)
        episodes = episodes_of(turns) if self.config.episodes else []
        inline = [] if self.config.defer_episode_embedding else [e.text for e in episodes]
        memory = self._prefetched(
            [c.supersedes_hint or c.text for c in kept] + [c.text for c in kept] + inline
        )
        # The session's writes — facts, supersedes, episodes, the embedding job — commit
        # together or not at all: a failure (or a lost lease) leaves the re-run a clean slate.
        # Each record is screened once, by the use case; the store's admission of the same
        # object reuses that verdict (admission.verdicts). The embedding ran before: the
        # transaction holds the store's write lock only while it writes.
        with self.store.transaction(key.tenant_id), verdicts():
            counts["superseded"] += self._finish_pending(principal, ref, key, lease)
            # A model's output waits for a reviewer as a candidate; it never activates itself
            # (LIFE-5). Deterministic extraction is written active, unverified (CONSOL-3).
            status = "candidate" if getattr(self.extractor, "uses_model", False) else None
            for candidate in kept[: self.config.max_candidates]:
                text, _ = scrub_secrets(candidate.text)
                quote, _ = scrub_secrets(candidate.quote)
                span: tuple[int | None, int | None] = (candidate.quote_start, candidate.quote_end)
                if quote != candidate.quote or candidate.quote_end - candidate.quote_start != len(
                    quote
                ):
                    span = (None, None)  # the offsets locate the quote as extracted (MEM-3)
                if self._promoted_before(ref, key.session_id, text) is not None:
                    counts["duplicates"] += 1
                    continue
                source_turn = said.get(candidate.turn_seq)
                said_at = None if source_turn is None else source_turn.said_at
                previous = later = None
                if status is None:  # a candidate changes nothing live until a reviewer activates it
                    # The slot first: it knows which statement is newer (a near duplicate found
                    # by similarity alone would let an older session's value replace a newer one).
                    if candidate.slot and single_valued(candidate.slot):
                        previous, later = self._slot_holder(ref, candidate.slot, said_at)
                    if previous is None and later is None:
                        previous = self._near_promoted(
                            memory, ref, candidate.supersedes_hint or text
                        )
                if previous is not None:
                    # Recorded before the write: a crash between the write and the supersede
                    # leaves the re-run enough to finish it (_finish_pending).
                    lease.heartbeat(
                        {
                            "written": counts["created"],
                            "pending": {"previous": previous, "text": text},
                        }
                    )
                try:
                    written = memory.remember(
                        principal,
                        text,
                        scope=scope,
                        kind=candidate.kind,
                        confidence=candidate.confidence,
                        source=Source.PROMOTED.value,
                        session_id=key.session_id,
                        quote=quote or None,
                        quote_start=span[0] if quote else None,
                        quote_end=span[1] if quote else None,
                        status=status,
                        model=f"{result.extractor_id}@{result.version}",
                        prompt_version=result.prompt_version,
                        observed_at=said_at,
                        tags=[slot_tag(candidate.slot)]
                        if candidate.slot and single_valued(candidate.slot)
                        else None,
                        turn=None
                        if source_turn is None
                        else TurnRef(source_turn.seq, source_turn.role),
                    )
                except QuipuError as exc:
                    if _transient(exc):
                        raise
                    if isinstance(exc, LimitExceeded):
                        counts["dropped_quota"] += 1
                    else:
                        counts["rejected"] += 1
                    continue
                if not written.created:
                    counts["duplicates"] += 1
                else:
                    counts["created"] += 1
                    counts["for_review"] += int(written.memory.status is Status.CANDIDATE)
                    if previous is not None and previous != written.memory.id:
                        self.memory.supersede(
                            principal, previous, written.memory.id, reason=SUPERSEDE_REASON
                        )
                        counts["superseded"] += 1
                    if later is not None and later != written.memory.id:
                        # an older value promoted after the newer one: current no more
                        self.memory.supersede(
                            principal, written.memory.id, later, reason=SLOT_OLDER_REASON
                        )
                        counts["superseded"] += 1
                if previous is not None or written.created:
                    lease.heartbeat({"written": counts["created"]})
            self._write_episodes(memory, principal, scope, ref, key, episodes, counts)
            if counts["episodes"] and self.config.defer_episode_embedding:
                self._enqueue_embedding()
            # Fenced at commit: a worker whose lease was taken over meanwhile commits nothing.
            lease.heartbeat({"written": counts["created"], "episodes": counts["episodes"]})
        return counts

    def _write_episodes(
        self,
        memory: MemoryService,
        principal: Principal,
        scope: str,
        ref: ScopeRef,
        key: SessionKey,
        episodes: list[Episode],
        counts: dict[str, int],
    ) -> None:
        """Keep the session's words: each episode written once per session (a re-run skips
        what this session already wrote, in any status), active and unverified, never
        superseding anything (issue 24, CONSOL-3); all of them in one batch, each screened
        once (:func:`quipu.memory_batch.remember_batch`)."""
        items: list[NewMemory] = []
        for episode in episodes:
            # one secret scan per text: a clean text's verdict is kept for the store's screen
            text = episode.text if clean_text(episode.text) else scrub_secrets(episode.text)[0]
            if self._promoted_before(ref, key.session_id, text) is not None:
                counts["duplicates"] += 1
                continue
            exact = text == episode.text  # a scrubbed span no longer locates the turn's words
            turn = TurnRef(
                episode.turn_seq,
                episode.role,
                episode.start if exact else None,
                episode.end if exact else None,
            )
            items.append(
                NewMemory(
                    text,
                    kind=Kind.EPISODE.value,
                    source=Source.PROMOTED.value,
                    session_id=key.session_id,
                    observed_at=episode.said_at,
                    turn=turn,
                )
            )
        results = remember_batch(
            memory,
            principal,
            items,
            scope=scope,
            defer_embedding=self.config.defer_episode_embedding,
        )
        for result in results:
            if isinstance(result, QuipuError):
                if _transient(result):
                    raise result
                counts["dropped_quota" if isinstance(result, LimitExceeded) else "rejected"] += 1
            elif result.created:
                counts["created"] += 1  # every memory written; ``episodes`` of them verbatim
                counts["episodes"] += 1
            else:
                counts["duplicates"] += 1

    def _enqueue_embedding(self) -> None:
        """Ask for the deferred episodes' vectors: one durable ``embed_pending`` job, a system
        job (the backfill embeds every tenant's rows) shared by every promotion while it waits
        (its key is fixed; the queue keeps one queued or running job per key). A job already
        running may finish before this promotion's rows are visible to it; the periodic
        ``embed_pending`` slot then embeds them."""
        self.store.enqueue_job(
            NewJob(SYSTEM_TENANT, EMBED_PENDING, "embed:deferred", max_attempts=5), self._clock()
        )

    def _prefetched(self, texts: list[str]) -> MemoryService:
        """The memory service with the run's texts embedded in one batch (one model call per
        promotion, not one per memory)."""
        if self.memory.embedder is None or not texts:
            return self.memory
        view = copy.copy(self.memory)
        view.embedder = PrefetchedEmbedder(self.memory.embedder, texts)
        return view

    def _finish_pending(
        self, principal: Principal, ref: ScopeRef, key: SessionKey, lease: Lease
    ) -> int:
        """Finish the supersede an earlier attempt of this job planned but may not have made
        (it was killed between the two writes). 1 when it made one now."""
        pending = lease.job.checkpoint.get("pending")
        if not isinstance(pending, dict):
            return 0
        made = 0
        written = self._promoted_before(ref, key.session_id, str(pending.get("text", "")))
        previous = self.store.get(ref, str(pending.get("previous", "")))
        if (
            written is not None
            and written.status is Status.ACTIVE
            and previous is not None
            and previous.id != written.id
            and previous.status is Status.ACTIVE
            and previous.source is Source.PROMOTED
        ):
            self.memory.supersede(principal, previous.id, written.id, reason=SUPERSEDE_REASON)
            made = 1
        lease.heartbeat({"written": 0})
        return made

    def _promoted_before(self, ref: ScopeRef, session_id: str, text: str) -> MemoryVersion | None:
        """The memory this session already promoted with exactly ``text``, in any status: the
        idempotency key of a candidate is (scope, session, normalised text)."""
        keys = [
            k
            for k, label in self.store.exact_candidates(ref, fold(text), content_hash(text))
            if label == "text"
        ]
        for row in self.store.load(keys).values():
            if row.source is Source.PROMOTED and row.provenance.session_id == session_id:
                return row
        return None

    def _slot_holder(
        self, ref: ScopeRef, slot: str, said_at: datetime | None
    ) -> tuple[str | None, str | None]:
        """The active promoted statement of a single-valued ``slot`` ("User lives in Berlin"
        for ``live``) from an earlier promotion: ``(id, None)`` when it is older than this
        statement (this one supersedes it), ``(None, id)`` when it is newer (a session promoted
        out of order: this one is written and superseded by it); ``(None, None)`` when there is
        none. Explicit memories never carry the tag and are never replaced (PROMO-4)."""
        flt = Filters(
            statuses=frozenset({Status.ACTIVE}),
            sources=frozenset({Source.PROMOTED}),
            kinds=_FACT_KINDS,
            tags=frozenset({slot_tag(slot)}),
        )
        rows = [
            m
            for m in self.store.list_page(ref, flt, None, _SLOT_ROWS).items
            if m.is_current and m.source is Source.PROMOTED and m.status is Status.ACTIVE
        ]
        if not rows:
            return None, None
        newest = max(rows, key=lambda m: (m.observed_at or m.recorded_at, m.recorded_at))
        if said_at is None or newest.observed_at is None or newest.observed_at <= said_at:
            return newest.id, None
        return None, newest.id

    def _near_promoted(self, memory: MemoryService, ref: ScopeRef, text: str) -> str | None:
        """The id of an active *promoted* memory nearly equal to ``text`` (never explicit, never
        an episode: episodes are the immutable record of what was said)."""
        embedder = memory.embedder
        if embedder is None:
            return None
        vector = embedder.embed_batch([text])[0]
        flt = Filters(
            statuses=frozenset({Status.ACTIVE}),
            sources=frozenset({Source.PROMOTED}),
            kinds=_FACT_KINDS,
        )
        found, _ = self.store.vector_candidates(ref, vector, flt, 1)
        if not found or found[0].score < NEAR_DUPLICATE:
            return None
        loaded = self.store.load([found[0].key]).get(found[0].key)
        if loaded is None or loaded.source is not Source.PROMOTED or not loaded.is_current:
            return None
        return loaded.id

    def _give_back(self, job: Job) -> None:
        """Return the compile the request reserved when this run does not compile."""
        if _holds_reservation(job):
            window = datetime.fromisoformat(str(job.payload["budget_window"]))
            self.store.release_budget(job.tenant_id, window)

    def _mark(
        self, key: SessionKey, fingerprint: str, last_seq: int, status: str, details: dict[str, Any]
    ) -> None:
        """Advance the eligibility marker (JOB-2)."""
        self.store.set_watermark(
            key, Watermark(fingerprint, last_seq, status, self._clock(), dict(details))
        )


#: Slots naming an attribute a person has one value of at a time: where they live and work,
#: their name, age, origin and role, a favourite, and the possessive slots whose noun is one
#: of the relations or attributes below ("my manager is Rosa", "my rent is $1,200").
#: A slot outside the list ("my sister is Ana", "my dog is Biscuit") is never replaced by a
#: later session: a second sister is not a correction of the first.
_SINGLE_SLOTS = frozenset({"live", "work", "name", "identity", "age", "origin", "role"})
_SINGLE_HEADS = frozenset(
    {
        "manager",
        "boss",
        "supervisor",
        "partner",
        "wife",
        "husband",
        "spouse",
        "girlfriend",
        "boyfriend",
        "fiance",
        "fiancee",
        "fiancé",
        "fiancée",
        "landlord",
        "doctor",
        "dentist",
        "therapist",
        "job",
        "title",
        "role",
        "employer",
        "company",
        "salary",
        "rent",
        "budget",
        "commute",
        "address",
        "birthday",
        "major",
        "school",
        "team",
        "name",
        "age",
        "hometown",
        "favourite",
        "favorite",
    }
)


#: Quantity slots (extraction.quantities, extractor 1.5): "how often the user does yoga", "how
#: many bikes", "the pre-approval amount" hold one value at a time.
QUANTITY_SLOT = "q:"


def single_valued(slot: str) -> bool:
    """Whether a later session's statement of ``slot`` replaces an earlier one (issue 24)."""
    if slot in _SINGLE_SLOTS or slot.startswith(("favourite:", QUANTITY_SLOT)):
        return True
    parts = slot.split(":")
    return len(parts) == 4 and parts[0] == "my" and parts[2] == "is" and parts[1] in _SINGLE_HEADS


def slot_tag(slot: str) -> str:
    """The tag marking a promoted fact with the single-valued attribute it states (issue 24,
    knowledge updates): ``slot:live``; a slot too long for a tag is named by its digest."""
    tag = f"slot:{slot}"
    if len(tag) <= 64:
        return tag
    return "slot:#" + hashlib.blake2b(slot.encode("utf-8"), digest_size=12).hexdigest()


#: What a 0- or 1-turn session's job result says (PROMO-2): a lone turn has no exchange to
#: read it against, and the sweep would otherwise promote every opening line of a chat.
TOO_SHORT = (
    "a session of 0 or 1 turn is not promoted (PROMO-2): append another turn and promote"
    " again, or remember() the fact directly"
)


def _holds_reservation(job: Job) -> bool:
    """The promote request reserved this job's compile; it covers the first attempt only."""
    return bool(job.payload.get("budget_reserved")) and job.attempts <= 1


def _transient(exc: BaseException) -> bool:
    """A refusal worth another attempt: a transient error, a rate limit, or anything that is
    not one of Quipu's typed errors (a driver's lost connection, a locked database)."""
    if isinstance(exc, QuipuError):
        return exc.transient or (isinstance(exc, LimitExceeded) and exc.code == "rate_limited")
    return isinstance(exc, Exception)


def sweep(
    memory: MemoryService, idle_for: timedelta, limit: int, clock: Callable[[], datetime]
) -> dict[str, Any]:
    """Enqueue promotion of idle sessions: each tenant's nearest expiry first (PROMO-6), the
    tenants taking turns. Each job acts as the subject that last wrote its session."""
    now = clock()
    store = memory.store
    queued = 0
    for idle in store.idle_sessions(now - idle_for, now, limit):
        _, created = store.enqueue_job(promotion_job(idle.key, idle.writer), now)
        queued += int(created)
    return {"queued": queued}
