"""The key/value plane on PostgreSQL (a mixin of :class:`PostgresStore`; KV-1).

Writers of one scope partition take turns on a transaction-scoped advisory lock (keyed by a
digest of tenant, scope and owner), so the compare-and-set check, the quota count and the
append are one serialised step across processes; the primary key (tenant, scope, owner, key,
version) backs it. Keys compare in byte order (``COLLATE "C"``), so a prefix is a key range.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.auth import AuditEvent
from quipu.core.kv import (
    KEY_END,
    EntryStatus,
    KVChange,
    KVEntry,
    check_write,
    dump,
    entry_audit,
    entry_of,
    quota_error,
)
from quipu.core.records import Scope, ScopeRef
from quipu.storage.admission import admit
from quipu.storage.decode import decode_row, decode_rows, loads
from quipu.storage.postgres.control import insert_audit
from quipu.storage.subject import subject_rows

_COLUMNS = (
    "tenant_id, scope, owner, key, version, value, status, actor, surface, agent_id, reason,"
    " recorded_at, ended_at"
)
_PARTITION = "tenant_id = %s AND scope = %s AND owner = %s"
#: One end user's partitions: its ``user`` scope and every ``agent_user`` scope of it.
SUBJECT_SQL = (
    "(scope = 'user' AND owner = %s) OR (scope = 'agent_user' AND strpos(owner, chr(31)) > 0"
    " AND substr(owner, strpos(owner, chr(31)) + 1) = %s)"
)


class KVTables:
    """Needs the store's ``_conn()`` and ``_tx()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def kv_write(
        self,
        ref: ScopeRef,
        change: KVChange,
        expected_version: int | None,
        now: datetime,
        quota: int,
    ) -> KVEntry:
        admit(change)
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ref),))
            row = conn.execute(
                f"SELECT version, status FROM kv_entries WHERE {_PARTITION} AND key = %s"
                " AND is_current",
                (*_part(ref), change.key),
            ).fetchone()
            current = None if row is None else (int(row[0]), EntryStatus(row[1]))
            version = check_write(change, current, expected_version)
            revived = current is None or current[1] is not EntryStatus.SET
            if change.status is EntryStatus.SET and revived:
                live = conn.execute(
                    f"SELECT count(*) FROM kv_entries WHERE {_PARTITION} AND is_current"
                    " AND status = 'set'",
                    _part(ref),
                ).fetchone()
                if live is not None and int(live[0]) >= quota:
                    raise quota_error(quota)
            if current is not None:
                conn.execute(
                    f"UPDATE kv_entries SET is_current = false, ended_at = %s WHERE {_PARTITION}"
                    " AND key = %s AND version = %s",
                    (now, *_part(ref), change.key, current[0]),
                )
            entry = entry_of(ref, change, version, now)
            conn.execute(
                f"INSERT INTO kv_entries ({_COLUMNS}, is_current)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, true)",
                (
                    *_part(ref),
                    change.key,
                    version,
                    dump(entry),
                    entry.status.value,
                    entry.actor,
                    entry.surface,
                    entry.agent_id,
                    entry.reason,
                    now,
                    None,
                ),
            )
            insert_audit(conn, entry_audit(entry))
            return entry

    def kv_get(self, ref: ScopeRef, key: str, as_of: datetime | None) -> KVEntry | None:
        where, args = _when(as_of)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM kv_entries WHERE {_PARTITION} AND key = %s AND {where}",
                (*_part(ref), key, *args),
            ).fetchone()
        return None if row is None else decode_row(_entry, row, key)

    def kv_history(self, ref: ScopeRef, key: str) -> list[KVEntry]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM kv_entries WHERE {_PARTITION} AND key = %s"
                " ORDER BY version",
                (*_part(ref), key),
            ).fetchall()
        return decode_rows(_entry, rows, lambda r: r[3])

    def kv_list(
        self, ref: ScopeRef, prefix: str, after: str | None, limit: int, as_of: datetime | None
    ) -> list[KVEntry]:
        where, args = _when(as_of)
        low = max(prefix, after + "\x01") if after is not None else prefix
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM kv_entries WHERE {_PARTITION} AND {where}"
                " AND status = 'set' AND key >= %s AND key < %s ORDER BY key LIMIT %s",
                (*_part(ref), *args, low, prefix + KEY_END, limit),
            ).fetchall()
        return decode_rows(_entry, rows, lambda r: r[3])

    def kv_erase(self, ref: ScopeRef, key: str, audit: AuditEvent) -> int:
        admit(audit)
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ref),))
            wiped = conn.execute(
                "UPDATE kv_entries SET value = NULL, reason = NULL, status = 'erased'"
                f" WHERE {_PARTITION} AND key = %s",
                (*_part(ref), key),
            ).rowcount
            if wiped:
                conn.execute(
                    "UPDATE audit_log SET reason = NULL WHERE tenant_id = %s"
                    " AND action IN ('kv.set', 'kv.delete') AND target_ids = %s",
                    (ref.tenant_id, [key]),
                )
                insert_audit(conn, audit)
            return int(wiped)

    def kv_subject_keys(
        self, tenant_id: str, user_id: str, limit: int
    ) -> list[tuple[ScopeRef, str]]:
        """Up to ``limit`` keys not yet erased in ``user_id``'s ``user`` and ``agent_user``
        partitions (a subject erasure's next batch)."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT DISTINCT scope, owner, key FROM kv_entries WHERE tenant_id = %s"
                f" AND status <> 'erased' AND ({SUBJECT_SQL}) ORDER BY scope, owner, key"
                " LIMIT %s",
                (tenant_id, user_id, user_id, limit),
            ).fetchall()
        return subject_rows(tenant_id, user_id, rows)


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _when(as_of: datetime | None) -> tuple[str, tuple[Any, ...]]:
    if as_of is None:
        return "is_current", ()
    return "recorded_at <= %s AND (ended_at IS NULL OR ended_at > %s)", (as_of, as_of)


def _lock_key(ref: ScopeRef) -> int:
    """A signed 64-bit advisory lock key for the partition's key/value writers."""
    raw = "\x1f".join(("kv", *_part(ref))).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def _entry(r: Sequence[Any]) -> KVEntry:
    return KVEntry(
        tenant_id=r[0],
        scope=Scope(r[1]),
        owner=r[2],
        key=r[3],
        version=int(r[4]),
        value=None if r[5] is None else loads(r[5]),
        status=EntryStatus(r[6]),
        actor=r[7],
        surface=r[8],
        agent_id=r[9],
        reason=r[10],
        recorded_at=r[11],
        ended_at=r[12],
    )
