"""Session memory use cases (SESSION-1..3) and promotion requests (PROMO-1, PROMO-5).

A session belongs to the subject that wrote it; another subject asking for the same id sees an
empty session. Turns expire (a required ``expires_at``, default TTL from settings) and a
pruning job deletes them. Appends are write requests: they take a token of the caller's write
rate limit (MEM-5) and are bounded in turns per session and bytes per subject (issue 20, #8).
Promotion is a durable job, one per (tenant, subject, session).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.core import validate
from quipu.core.jobs import Job, NewJob
from quipu.core.records import Principal
from quipu.core.sessions import (
    MAX_TURN_BYTES,
    PROMOTED,
    ROLES,
    SessionBounds,
    SessionKey,
    SessionTurn,
    session_owner,
)
from quipu.errors import InvalidInput, LimitExceeded
from quipu.guard import Guard
from quipu.safety import find_secrets, secret_error
from quipu.storage.base import Store

PROMOTE = "promote_session"
#: How far ahead of the server clock a turn's ``observed_at`` may be (clock skew).
FUTURE_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class SessionConfig:
    ttl: timedelta = timedelta(days=7)
    max_page: int = 500
    model_budget_per_hour: int = 0
    model_backed: bool = False
    bounds: SessionBounds = field(default_factory=SessionBounds)


def promotion_job(key: SessionKey, writer: Principal, **extra: Any) -> NewJob:
    """The promotion job of one session, acting as ``writer`` (one per tenant, subject and
    session at a time: PROMO-1)."""
    payload: dict[str, Any] = {
        "session_id": key.session_id,
        "owner": key.owner,
        "key_id": writer.key_id,
        "role": writer.role.value,
        "agent_id": writer.agent_id,
        "user_id": writer.user_id,
        "surface": writer.surface,
        "grants": sorted(writer.grants),
        **extra,
    }
    return NewJob(key.tenant_id, PROMOTE, f"{key.owner}\x1f{key.session_id}", payload)


class SessionService:
    def __init__(
        self,
        store: Store,
        config: SessionConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        *,
        guard: Guard | None = None,
    ) -> None:
        """``guard``: the memory service's, whose write rate limit appends and promotion
        requests take a token of (`quipu serve --auth` sets that limit after building)."""
        self.store = store
        self.config = config or SessionConfig()
        self.guard = guard
        self._clock = clock or (lambda: datetime.now(UTC))

    def append(
        self,
        principal: Principal,
        session_id: object,
        role: object,
        content: object,
        *,
        metadata: object = None,
        expires_at: object = None,
        observed_at: object = None,
    ) -> SessionTurn:
        """Append one turn. ``observed_at``: when it was said (default now), so imported
        history keeps its dates; promotion dates the turn's memories with it and resolves its
        relative dates ("yesterday") against it (issue 24). A time more than
        :data:`FUTURE_SKEW` ahead of the server clock is refused (``invalid_time``)."""
        key = self._key(principal, session_id)
        if role not in ROLES:
            raise InvalidInput(
                f"role must be one of {', '.join(ROLES)}",
                code="invalid_role",
                details={"allowed": list(ROLES)},
            )
        body = validate.text(content, max_bytes=MAX_TURN_BYTES, field="content")
        findings = find_secrets(body)
        if findings:
            raise secret_error(findings)
        meta = validate.metadata(metadata, max_bytes=16_384)
        now = self._clock()
        expires = validate.instant(expires_at, field="expires_at") or now + self.config.ttl
        if expires <= now:
            raise InvalidInput("expires_at must be in the future", code="invalid_time")
        said = validate.instant(observed_at, field="observed_at") or now
        if said > now + FUTURE_SKEW:
            raise InvalidInput(
                "observed_at must not be in the future",
                code="invalid_time",
                details={"field": "observed_at"},
            )
        self._admit(principal)
        turn = self.store.append_turn(
            key, principal, str(role), body, meta, now, expires, self.config.bounds, said
        )
        self._audit(principal, "session.append", key, {"seq": turn.seq, "role": turn.role})
        return turn

    def history(
        self,
        principal: Principal,
        session_id: object,
        *,
        after: int = 0,
        limit: int | None = None,
    ) -> list[SessionTurn]:
        key = self._key(principal, session_id)
        size = validate.bounded_int(
            self.config.max_page if limit is None else limit,
            field="limit",
            low=1,
            high=self.config.max_page,
        )
        start = validate.bounded_int(after, field="after", low=0, high=2**62)
        return self.store.session_turns(key, start, size, self._clock())

    def promote(self, principal: Principal, session_id: object) -> tuple[Job, bool]:
        """Queue promotion of this session (one job per tenant, subject and session).

        With a model-backed extractor one compile of the tenant's hourly budget is reserved
        first, but only when a compile will run (PROMO-5, issue 20 #15): not for a 0- or 1-turn
        session, not for one unchanged since its last promotion, and not when the session's
        job is already queued (the reservation is given back). Over budget is a 429 and no
        model is called."""
        key = self._key(principal, session_id)
        self._admit(principal)
        now = self._clock()
        extra: dict[str, Any] = {}
        if self.config.model_backed and self._would_compile(key, now):
            window = now.replace(minute=0, second=0, microsecond=0)
            if not self.store.reserve_budget(
                key.tenant_id, window, self.config.model_budget_per_hour
            ):
                raise LimitExceeded(
                    "this tenant's hourly budget of model compiles is spent",
                    code="budget_exhausted",
                    retry_after=(window + timedelta(hours=1) - now).total_seconds(),
                )
            extra = {"budget_reserved": True, "budget_window": window.isoformat()}
        job, created = self.store.enqueue_job(promotion_job(key, principal, **extra), now)
        if extra and not created:
            self.store.release_budget(key.tenant_id, datetime.fromisoformat(extra["budget_window"]))
        self._audit(principal, "session.promote", key, {"job_id": job.job_id, "created": created})
        return job, created

    def _audit(
        self, principal: Principal, action: str, key: SessionKey, details: dict[str, Any]
    ) -> None:
        """Audit a session write with its ids only, never its content (SAFE-4)."""
        if self.guard is not None:
            self.guard.audit(principal, action, (key.session_id,), details=details)

    def _would_compile(self, key: SessionKey, now: datetime) -> bool:
        """Whether a promotion now would call the extractor: two turns or more, and turns
        after the last promotion's watermark (read cheaply; the job checks the fingerprint)."""
        if len(self.store.session_turns(key, 0, 2, now)) < 2:
            return False
        mark = self.store.get_watermark(key)
        if mark is None or mark.status != PROMOTED:
            return True
        return bool(self.store.session_turns(key, mark.last_seq, 1, now))

    def _admit(self, principal: Principal) -> None:
        if self.guard is not None:
            self.guard.admit_write(principal)

    def _key(self, principal: Principal, session_id: object) -> SessionKey:
        ident = validate.identifier(session_id, field="session_id")
        return SessionKey(principal.tenant_id, session_owner(principal), ident)
