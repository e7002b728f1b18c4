"""``Idempotency-Key`` on HTTP writes (API-2, issue 27): a retried ``POST`` gets the first
answer back instead of running twice.

An ASGI layer inside :class:`~quipu.surfaces.http.guard.RequestGuard` (so the request's
principal is known and its body already bounded and screened). For a ``POST`` under ``/v1``
(except the reads in :data:`READS`) carrying the header:

1. the key is checked (:func:`quipu.core.idempotency.check_key`) and claimed in the store under
   (tenant, credential, key) with the request's fingerprint, in one transaction;
2. a key already claimed answers at once: its stored answer, byte for byte, with
   ``Idempotent-Replayed: true``; 422 ``idempotency_key_reused`` when the fingerprint differs;
   409 ``idempotency_key_in_progress`` while the first request still runs;
3. otherwise the request runs, and its answer is stored when
   :func:`~quipu.core.idempotency.replayable` (the claim is released otherwise, and when the
   request fails or the answer is over :data:`~quipu.core.idempotency.MAX_STORED_BYTES`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quipu.core.idempotency import (
    MAX_STORED_BYTES,
    IdempotencyScope,
    StoredAnswer,
    check_key,
    fingerprint,
    replayable,
)
from quipu.core.records import Principal
from quipu.errors import QuipuError
from quipu.storage.base import Store
from quipu.surfaces.http import errors
from quipu.surfaces.http.deps import PRINCIPAL_KEY

HEADER = b"idempotency-key"
REPLAYED = b"idempotent-replayed"
#: POST routes that only read: the header is ignored there.
READS = frozenset({"/v1/recall"})
#: Answer headers kept with a stored answer (the rest are remade by the server).
KEPT_HEADERS = frozenset({b"content-type", b"location", b"retry-after"})


class Idempotency:
    def __init__(self, app: ASGIApp, *, store: Callable[[], Store], ttl_seconds: int) -> None:
        self.app = app
        self._store = store
        self.ttl = timedelta(seconds=ttl_seconds)

    @property
    def store(self) -> Store:
        """The service's store, looked up per request (the app may be built before it)."""
        return self._store()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = [v for n, v in scope.get("headers", []) if n == HEADER]
        principal = scope.get(PRINCIPAL_KEY)
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not raw
            or not isinstance(principal, Principal)
            or scope["path"] in READS
        ):
            await self.app(scope, receive, send)
            return
        try:
            key = check_key(raw)
        except QuipuError as exc:
            await errors.error_response(exc)(scope, receive, send)
            return
        body, more = await _read_body(receive)
        ident = IdempotencyScope(principal.tenant_id, principal.key_id, key)
        mark = fingerprint(scope["method"], scope["path"], scope.get("query_string", b""), body)
        now = datetime.now(UTC)
        found = await run_in_threadpool(
            self.store.claim_idempotency, ident, mark, now, now + self.ttl
        )
        if found is not None:
            await _answer_again(found, mark, scope, receive, send)
            return
        await self._run(ident, scope, _replaying(body, more, receive), send)

    async def _run(
        self, ident: IdempotencyScope, scope: Scope, receive: Receive, send: Send
    ) -> None:
        status = 0
        headers: list[tuple[str, str]] = []
        parts: list[bytes] = []
        size = 0

        async def keep(message: Message) -> None:
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
                headers.extend(
                    (n.decode("latin-1"), v.decode("latin-1"))
                    for n, v in message.get("headers", [])
                    if n.lower() in KEPT_HEADERS
                )
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                size += len(chunk)
                if size <= MAX_STORED_BYTES:
                    parts.append(chunk)
            await send(message)

        stored = False
        try:
            await self.app(scope, receive, keep)
            if replayable(status) and size <= MAX_STORED_BYTES:
                await run_in_threadpool(
                    self.store.finish_idempotency, ident, status, headers, b"".join(parts)
                )
                stored = True
        finally:
            if not stored:
                await run_in_threadpool(self.store.release_idempotency, ident)


async def _answer_again(
    found: StoredAnswer, mark: str, scope: Scope, receive: Receive, send: Send
) -> None:
    if found.fingerprint != mark:
        refusal = errors.envelope(
            422,
            "idempotency_key_reused",
            "this Idempotency-Key was used for a different request; use a new key",
            {"field": "header.idempotency-key"},
        )
        await refusal(scope, receive, send)
        return
    if found.status is None:
        busy = errors.envelope(
            409,
            "idempotency_key_in_progress",
            "the first request with this Idempotency-Key is still running; retry shortly",
            {"field": "header.idempotency-key"},
        )
        busy.headers["Retry-After"] = "1"
        await busy(scope, receive, send)
        return
    headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in found.headers]
    headers += [
        (b"content-length", str(len(found.body)).encode()),
        (REPLAYED, b"true"),
    ]
    await send({"type": "http.response.start", "status": found.status, "headers": headers})
    await send({"type": "http.response.body", "body": found.body})


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The request body, and the message that ended it when it was not a body part (a
    disconnect), to hand on."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), message
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts), None


def _replaying(body: bytes, ended: Message | None, receive: Receive) -> Receive:
    """A receive that gives the app ``body`` in one message first, then the real channel."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if ended is not None:
        pending = [ended]

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
