"""Idempotency keys on SQLite (a mixin of :class:`SQLiteStore`; issue 27)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from datetime import datetime

from quipu.core.idempotency import IdempotencyScope, StoredAnswer
from quipu.storage.timecodec import to_micros

_WHERE = "tenant_id = ? AND key_id = ? AND idem_key = ?"


class IdempotencyTables:
    """Needs ``_tx()`` (the write transaction) from the store."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def claim_idempotency(
        self, scope: IdempotencyScope, fingerprint: str, now: datetime, expires_at: datetime
    ) -> StoredAnswer | None:
        at = to_micros(now)
        ident = (scope.tenant_id, scope.key_id, scope.key)
        with self._tx() as c:
            c.execute(
                "DELETE FROM idempotency_keys WHERE tenant_id = ? AND expires_at <= ?",
                (scope.tenant_id, at),
            )
            row = c.execute(
                f"SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE {_WHERE}",
                ident,
            ).fetchone()
            if row is not None:
                return StoredAnswer(row[0], row[1], _headers(row[2]), bytes(row[3]))
            c.execute(
                "INSERT INTO idempotency_keys (tenant_id, key_id, idem_key, fingerprint,"
                " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (*ident, fingerprint, at, to_micros(expires_at)),
            )
        return None

    def finish_idempotency(
        self, scope: IdempotencyScope, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        with self._tx() as c:
            c.execute(
                f"UPDATE idempotency_keys SET status = ?, headers = ?, body = ? WHERE {_WHERE}",
                (status, json.dumps(headers), body, scope.tenant_id, scope.key_id, scope.key),
            )

    def release_idempotency(self, scope: IdempotencyScope) -> None:
        with self._tx() as c:
            c.execute(
                f"DELETE FROM idempotency_keys WHERE {_WHERE} AND status IS NULL",
                (scope.tenant_id, scope.key_id, scope.key),
            )


def _headers(raw: str) -> list[tuple[str, str]]:
    return [(str(name), str(value)) for name, value in json.loads(raw)]
