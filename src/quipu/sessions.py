"""Session memory use cases (SESSION-1..3) and promotion requests (PROMO-1, PROMO-5).

A session belongs to the subject that wrote it; another subject asking for the same id sees an
empty session. Turns expire (a required ``expires_at``, default TTL from settings) and a
pruning job deletes them. Promotion is a durable job, one per (tenant, subject, session).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.core import validate
from quipu.core.jobs import Job, NewJob
from quipu.core.records import Principal
from quipu.core.sessions import MAX_TURN_BYTES, ROLES, SessionKey, SessionTurn, session_owner
from quipu.errors import InvalidInput, LimitExceeded
from quipu.safety import find_secrets, secret_error
from quipu.storage.base import Store

PROMOTE = "promote_session"


@dataclass(frozen=True)
class SessionConfig:
    ttl: timedelta = timedelta(days=7)
    max_page: int = 500
    model_budget_per_hour: int = 0
    model_backed: bool = False


class SessionService:
    def __init__(
        self,
        store: Store,
        config: SessionConfig | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.config = config or SessionConfig()
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
    ) -> SessionTurn:
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
        return self.store.append_turn(key, str(role), body, meta, now, expires)

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
        """Queue promotion of this session (one job per tenant, subject and session). With a
        model-backed extractor one call of the tenant's hourly budget is reserved first: over
        budget is a 429 and no model is called."""
        key = self._key(principal, session_id)
        payload: dict[str, Any] = {
            "session_id": key.session_id,
            "owner": key.owner,
            "key_id": principal.key_id,
            "role": principal.role.value,
            "agent_id": principal.agent_id,
            "user_id": principal.user_id,
            "surface": principal.surface,
            "grants": sorted(principal.grants),
        }
        if self.config.model_backed:
            window = self._clock().replace(minute=0, second=0, microsecond=0)
            if not self.store.reserve_budget(
                key.tenant_id, window, self.config.model_budget_per_hour
            ):
                raise LimitExceeded(
                    "this tenant's hourly budget of model compiles is spent",
                    code="budget_exhausted",
                    retry_after=(window + timedelta(hours=1) - self._clock()).total_seconds(),
                )
            payload["budget_reserved"] = True
        return self.store.enqueue_job(
            NewJob(key.tenant_id, PROMOTE, f"{key.owner}\x1f{key.session_id}", payload),
            self._clock(),
        )

    def _key(self, principal: Principal, session_id: object) -> SessionKey:
        ident = validate.identifier(session_id, field="session_id")
        return SessionKey(principal.tenant_id, session_owner(principal), ident)
