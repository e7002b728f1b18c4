"""Idempotency keys of HTTP writes (API-2, issue 27): the rules, as pure functions.

A client that may retry a ``POST`` sends ``Idempotency-Key``; the first answer is stored under
(tenant, credential, key) with the request's fingerprint and replayed to a repeat within the
window. The stores keep the rows (table ``idempotency_keys``); the HTTP layer
(:mod:`quipu.surfaces.http.idempotency`) applies these rules.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from quipu.errors import InvalidInput

#: Visible ASCII only, 1-255 characters (what Stripe and the IETF draft allow in practice).
_KEY = re.compile(rb"[\x21-\x7e]{1,255}")
MAX_KEY_CHARS = 255
#: Largest answer stored for replay; a larger one is answered but not kept (a retry runs).
MAX_STORED_BYTES = 1_048_576


@dataclass(frozen=True)
class IdempotencyScope:
    """Whose key: a key is only ever replayed to the credential that sent it."""

    tenant_id: str
    key_id: str
    key: str


@dataclass(frozen=True)
class StoredAnswer:
    """A key's row: the request's fingerprint and, once it finished, its answer (``status``
    ``None``: the first request is still running)."""

    fingerprint: str
    status: int | None
    headers: list[tuple[str, str]]
    body: bytes


def check_key(raw: list[bytes]) -> str:
    """The one ``Idempotency-Key`` header, as the digest that is stored in its place (422
    ``invalid_idempotency_key`` otherwise): a caller's key may be anything, a secret pasted by
    mistake included, and only its equality matters, so the store never holds the value."""
    if len(raw) != 1 or _KEY.fullmatch(raw[0]) is None:
        raise InvalidInput(
            f"Idempotency-Key is one header of 1-{MAX_KEY_CHARS} visible ASCII characters",
            code="invalid_idempotency_key",
            details={"field": "header.idempotency-key"},
        )
    return "sha256:" + hashlib.sha256(raw[0]).hexdigest()


def fingerprint(method: str, path: str, query: bytes, body: bytes) -> str:
    """What makes two requests "the same request": method, path, query string and body."""
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode("utf-8", "surrogatepass"), query, body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def replayable(status: int) -> bool:
    """Answers stored for replay: success and the client's own errors, except 429 (retry
    later means retry later) and 408; a 5xx is never stored, so a retry runs again."""
    return 200 <= status < 500 and status not in (408, 429)
