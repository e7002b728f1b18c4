"""Console sign-in sessions: a signed cookie every worker process can check.

`quipu serve` runs several worker processes, so a session kept in one process's memory is
unknown to the next request's process. The cookie instead carries the key's id, the tenant a
superadmin picked, when the session began, when it was last used and a random nonce, signed
with HMAC-SHA-256 under the key's stored digest (the SHA-256 of the secret, which never leaves
the server). Any process checks it against the store on every request (:meth:`Access.resume`):
a revoked or expired key ends every session at once, and nobody without the digest can forge
one. The API key itself is never in the cookie. The session ends after ``idle`` without a
request (each request re-signs the cookie with the new time), after ``lifetime`` in any case,
and on sign-out, which clears the cookie; the CSRF token every form posts back is derived from
the same digest and nonce."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

#: Sign-in sessions end after this long without a request.
IDLE_TIMEOUT = timedelta(minutes=15)
#: ... and after this long in any case.
LIFETIME = timedelta(hours=8)
#: A cookie longer than this is not one the console issued.
MAX_COOKIE = 600


@dataclass(frozen=True)
class ConsoleSession:
    key_id: str
    tenant: str | None
    """The tenant a superadmin acts on (None for a tenant admin, whose key names it)."""
    began: int
    seen: int
    nonce: str


class SessionSigner:
    """Issues and checks session cookies; the clock is injectable for tests."""

    def __init__(
        self,
        *,
        idle: timedelta = IDLE_TIMEOUT,
        lifetime: timedelta = LIFETIME,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.idle = int(idle.total_seconds())
        self.lifetime = int(lifetime.total_seconds())
        self._clock = clock or (lambda: datetime.now(UTC))

    def now(self) -> int:
        return int(self._clock().timestamp())

    def begin(self, key_id: str, tenant: str | None) -> ConsoleSession:
        at = self.now()
        return ConsoleSession(key_id, tenant, at, at, secrets.token_urlsafe(16))

    def touched(self, session: ConsoleSession) -> ConsoleSession:
        return replace(session, seen=self.now())

    def cookie(self, session: ConsoleSession, digest: str) -> str:
        body = _b64(
            json.dumps(
                [session.key_id, session.tenant, session.began, session.seen, session.nonce],
                separators=(",", ":"),
            ).encode()
        )
        return f"{body}.{_mac(digest, 'session', body)}"

    @staticmethod
    def unverified(cookie: str | None) -> tuple[ConsoleSession, str, str] | None:
        """The session a cookie claims, its signed part and its signature, before the check
        (the key id says whose digest checks it); None when it is not shaped like ours."""
        if not cookie or len(cookie) > MAX_COOKIE or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        try:
            raw = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, UnicodeDecodeError):
            return None
        if not (isinstance(raw, list) and len(raw) == 5):
            return None
        key_id, tenant, began, seen, nonce = raw
        if not (
            isinstance(key_id, str)
            and (tenant is None or isinstance(tenant, str))
            and type(began) is int
            and type(seen) is int
            and isinstance(nonce, str)
        ):
            return None
        return ConsoleSession(key_id, tenant, began, seen, nonce), body, mac

    def verify(self, session: ConsoleSession, body: str, mac: str, digest: str) -> bool:
        """The signature is the digest's, and the session is neither idle nor too old."""
        if not hmac.compare_digest(mac.encode(), _mac(digest, "session", body).encode()):
            return False
        now = self.now()
        return session.seen <= now + 60 and (
            now - session.seen <= self.idle and now - session.began <= self.lifetime
        )

    @staticmethod
    def csrf(session: ConsoleSession, digest: str) -> str:
        """The session's CSRF token: bound to its nonce, signed like the cookie."""
        return _mac(digest, "csrf", session.nonce)


def same_token(expected: str, given: str | None) -> bool:
    """A constant-time comparison of a CSRF token."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def _mac(digest: str, purpose: str, message: str) -> str:
    key = hashlib.sha256(f"quipu-console:{purpose}:{digest}".encode()).digest()
    return _b64(hmac.new(key, message.encode(), hashlib.sha256).digest())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
