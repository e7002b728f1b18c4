"""Idempotency keys on PostgreSQL (a mixin of :class:`PostgresStore`; issue 27). A claim is
one transaction holding the key's row lock, so two processes never both run one key."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from quipu.core.idempotency import IdempotencyScope, StoredAnswer

_WHERE = "tenant_id = %s AND key_id = %s AND idem_key = %s"


class IdempotencyTables:
    """Needs ``_tx()`` (one transaction) from the store."""

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def claim_idempotency(
        self, scope: IdempotencyScope, fingerprint: str, now: datetime, expires_at: datetime
    ) -> StoredAnswer | None:
        ident = (scope.tenant_id, scope.key_id, scope.key)
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM idempotency_keys WHERE tenant_id = %s AND expires_at <= %s",
                (scope.tenant_id, now),
            )
            claimed = conn.execute(
                "INSERT INTO idempotency_keys (tenant_id, key_id, idem_key, fingerprint,"
                " created_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (tenant_id, key_id, idem_key) DO NOTHING RETURNING 1",
                (*ident, fingerprint, now, expires_at),
            ).fetchone()
            if claimed is not None:
                return None
            row = conn.execute(
                f"SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE {_WHERE}",
                ident,
            ).fetchone()
        if row is None:  # pragma: no cover - released between the insert and the read
            return StoredAnswer(fingerprint, None, [], b"")
        return StoredAnswer(row[0], row[1], [(str(n), str(v)) for n, v in row[2]], bytes(row[3]))

    def finish_idempotency(
        self, scope: IdempotencyScope, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                f"UPDATE idempotency_keys SET status = %s, headers = %s, body = %s WHERE {_WHERE}",
                (status, Jsonb(headers), body, scope.tenant_id, scope.key_id, scope.key),
            )

    def release_idempotency(self, scope: IdempotencyScope) -> None:
        with self._tx() as conn:
            conn.execute(
                f"DELETE FROM idempotency_keys WHERE {_WHERE} AND status IS NULL",
                (scope.tenant_id, scope.key_id, scope.key),
            )
