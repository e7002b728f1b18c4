"""Promotion: compile a session's turns into long-term memories with no remember call
(PROMO-1..6). Idempotent by session fingerprint; survivors gated by confidence and a cap,
scrubbed of secrets, embedded at write time; exact duplicates are no-ops; a near duplicate of an
earlier *promoted* memory supersedes it, never an explicit one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.core.query import Filters
from quipu.core.records import Principal, Role, Source, Status
from quipu.core.scopes import resolve_scope
from quipu.core.sessions import SessionKey, Watermark, session_fingerprint
from quipu.errors import LimitExceeded, QuipuError
from quipu.extraction.base import Extractor, Turn
from quipu.jobs.queue import Lease
from quipu.jobs.worker import Retryable
from quipu.memories import MemoryService
from quipu.safety import scrub_secrets

#: Cosine similarity at which a new promoted memory replaces an earlier promoted one.
NEAR_DUPLICATE = 0.90


@dataclass(frozen=True)
class PromotionConfig:
    min_confidence: float = 0.5
    max_candidates: int = 20
    scope: str = "agent_user"
    max_turns: int = 2000
    budget_per_hour: int = 0


class Promoter:
    def __init__(
        self,
        memory: MemoryService,
        extractor: Extractor,
        config: PromotionConfig | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.memory = memory
        self.store = memory.store
        self.extractor = extractor
        self.config = config or PromotionConfig()
        self._clock = clock or (lambda: datetime.now(UTC))

    def handle(self, lease: Lease) -> dict[str, Any]:
        job = lease.job
        p = job.payload
        key = SessionKey(job.tenant_id, p["owner"], p["session_id"])
        now = self._clock()
        turns = self.store.session_turns(key, 0, self.config.max_turns, now)
        if len(turns) <= 1:
            return {"outcome": "noop", "turns": len(turns)}
        fingerprint = session_fingerprint(turns)
        mark = self.store.get_watermark(key)
        if mark is not None and mark.fingerprint == fingerprint and mark.status == "promoted":
            return {"outcome": "unchanged", "turns": len(turns)}
        if getattr(self.extractor, "uses_model", False) and not p.get("budget_reserved"):
            window = now.replace(minute=0, second=0, microsecond=0)
            if not self.store.reserve_budget(key.tenant_id, window, self.config.budget_per_hour):
                self._mark(key, fingerprint, turns[-1].seq, "over_budget", {})
                return {"outcome": "over_budget", "turns": len(turns)}
        result = self.extractor.run([Turn(t.role, t.content, t.seq, t.created_at) for t in turns])
        if result.failure is not None:
            self._mark(key, fingerprint, turns[-1].seq, "failed", {"reason": result.failure.code})
            if result.failure.retryable:
                raise Retryable(f"extraction failed: {result.failure.message}")
            return {"outcome": "failed", "reason": result.failure.code}
        principal = Principal(
            tenant_id=job.tenant_id,
            key_id=p["key_id"],
            role=Role(p["role"]),
            agent_id=p.get("agent_id"),
            user_id=p.get("user_id"),
            grants=frozenset(p.get("grants", [])),
            surface="promotion",
        )
        counts = self._write(principal, key, result, lease)
        self._mark(key, fingerprint, turns[-1].seq, "promoted", counts)
        return {"outcome": "promoted", "turns": len(turns), **counts}

    def _write(
        self, principal: Principal, key: SessionKey, result: Any, lease: Lease
    ) -> dict[str, int]:
        counts = {
            "candidates": len(result.candidates),
            "created": 0,
            "duplicates": 0,
            "superseded": 0,
            "below_confidence": 0,
            "over_cap": 0,
            "dropped_quota": 0,
            "rejected": 0,
            **{f"extractor_{k}": v for k, v in result.dropped.items()},
        }
        kept = [c for c in result.candidates if c.confidence >= self.config.min_confidence]
        counts["below_confidence"] = len(result.candidates) - len(kept)
        kept.sort(key=lambda c: -c.confidence)
        counts["over_cap"] = max(0, len(kept) - self.config.max_candidates)
        scope = self._scope(principal)
        for candidate in kept[: self.config.max_candidates]:
            text, _ = scrub_secrets(candidate.text)
            quote, _ = scrub_secrets(candidate.quote)
            previous = self._near_promoted(principal, scope, candidate.supersedes_hint or text)
            try:
                written = self.memory.remember(
                    principal,
                    text,
                    scope=scope,
                    kind=candidate.kind,
                    confidence=candidate.confidence,
                    source=Source.PROMOTED.value,
                    session_id=key.session_id,
                    quote=quote or None,
                    model=f"{result.extractor_id}@{result.version}",
                    prompt_version=result.prompt_version,
                    observed_at=None,
                )
            except LimitExceeded:
                counts["dropped_quota"] += 1
                continue
            except QuipuError:
                counts["rejected"] += 1
                continue
            if not written.created:
                counts["duplicates"] += 1
                continue
            counts["created"] += 1
            if previous is not None and previous != written.memory.id:
                self.memory.supersede(
                    principal,
                    previous,
                    written.memory.id,
                    reason="promotion: newer statement of the same fact",
                )
                counts["superseded"] += 1
            lease.heartbeat({"written": counts["created"]})
        return counts

    def _near_promoted(self, principal: Principal, scope: str, text: str) -> str | None:
        """The id of an active *promoted* memory nearly equal to ``text`` (never explicit)."""
        embedder = self.memory.embedder
        if embedder is None:
            return None
        ref = resolve_scope(principal, scope)
        vector = embedder.embed_batch([text])[0]
        flt = Filters(statuses=frozenset({Status.ACTIVE}), sources=frozenset({Source.PROMOTED}))
        found, _ = self.store.vector_candidates(ref, vector, flt, 1)
        if not found or found[0].score < NEAR_DUPLICATE:
            return None
        loaded = self.store.load([found[0].key]).get(found[0].key)
        if loaded is None or loaded.source is not Source.PROMOTED or not loaded.is_current:
            return None
        return loaded.id

    def _scope(self, principal: Principal) -> str:
        if self.config.scope == "agent_user" and not principal.user_id:
            return "agent"
        return self.config.scope

    def _mark(
        self, key: SessionKey, fingerprint: str, last_seq: int, status: str, details: dict[str, Any]
    ) -> None:
        """Advance the eligibility marker on every outcome (JOB-2)."""
        self.store.set_watermark(
            key, Watermark(fingerprint, last_seq, status, self._clock(), dict(details))
        )


def sweep(
    memory: MemoryService, idle_for: timedelta, limit: int, clock: Callable[[], datetime]
) -> dict[str, Any]:
    """Enqueue promotion of idle sessions, nearest expiry first (PROMO-1, PROMO-6)."""
    from quipu.core.jobs import NewJob
    from quipu.sessions import PROMOTE

    now = clock()
    store = memory.store
    queued = 0
    for idle in store.idle_sessions(now - idle_for, now, limit):
        agent, _, user = idle.key.owner.partition("\x1f")
        payload: dict[str, Any] = {
            "session_id": idle.key.session_id,
            "owner": idle.key.owner,
            "key_id": "promotion-sweep",
            "role": Role.AGENT.value,
            "agent_id": agent,
            "user_id": user or None,
            "surface": "sweep",
            "grants": [],
        }
        _, created = store.enqueue_job(
            NewJob(
                idle.key.tenant_id, PROMOTE, f"{idle.key.owner}\x1f{idle.key.session_id}", payload
            ),
            now,
        )
        queued += int(created)
    return {"queued": queued}
