"""Console sign-in sessions, kept server-side in the serving process.

The browser holds only a random session id (an HttpOnly, SameSite=Strict cookie); the API key
it was exchanged for stays here and is authenticated again on every request, so a revoked or
expired key ends the session at once. A session ends after ``idle`` without a request, after
``lifetime`` in any case, and on sign-out. Each session has its own CSRF token, which every
form posts back."""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

#: Sign-in sessions end after this long without a request.
IDLE_TIMEOUT = timedelta(minutes=15)
#: ... and after this long in any case.
LIFETIME = timedelta(hours=8)
#: At most this many live sessions per process; the oldest is dropped past it.
MAX_SESSIONS = 1000


@dataclass
class ConsoleSession:
    session_id: str
    secret: str
    """The API key the operator signed in with (never sent back to the browser)."""
    tenant: str | None
    """The tenant a superadmin acts on (None for a tenant admin, whose key names it)."""
    csrf: str
    created_at: datetime
    seen_at: datetime
    notices: list[str] = field(default_factory=list)
    """Messages shown once on the next page (the result of the last action)."""


class SessionBook:
    """The live sessions of one server process, thread-safe."""

    def __init__(
        self,
        *,
        idle: timedelta = IDLE_TIMEOUT,
        lifetime: timedelta = LIFETIME,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.idle = idle
        self.lifetime = lifetime
        self._clock = clock or (lambda: datetime.now(UTC))
        self._sessions: dict[str, ConsoleSession] = {}
        self._lock = threading.Lock()

    def open(self, secret: str, tenant: str | None) -> ConsoleSession:
        now = self._clock()
        session = ConsoleSession(
            session_id=secrets.token_urlsafe(32),
            secret=secret,
            tenant=tenant,
            csrf=secrets.token_urlsafe(32),
            created_at=now,
            seen_at=now,
        )
        with self._lock:
            self._drop_stale(now)
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.seen_at)
                del self._sessions[oldest.session_id]
            self._sessions[session.session_id] = session
        return session

    def find(self, session_id: str | None) -> ConsoleSession | None:
        """The live session of a cookie's id, its idle clock restarted; None when unknown,
        idle too long or too old (and then it is gone)."""
        if not session_id or len(session_id) > 100:
            return None
        now = self._clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if self._stale(session, now):
                del self._sessions[session_id]
                return None
            session.seen_at = now
            return session

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def _stale(self, session: ConsoleSession, now: datetime) -> bool:
        return now - session.seen_at > self.idle or now - session.created_at > self.lifetime

    def _drop_stale(self, now: datetime) -> None:
        for ident in [i for i, s in self._sessions.items() if self._stale(s, now)]:
            del self._sessions[ident]


def same_token(expected: str, given: str | None) -> bool:
    """A constant-time comparison of a CSRF token."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())
