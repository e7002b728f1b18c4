"""The compiled memory index on PostgreSQL (a mixin of :class:`PostgresStore`; CONSOL-1, 2).

Rewriters of one scope take turns on a transaction-scoped advisory lock (keyed by a digest of
tenant, scope and owner), so reading the current version, checking that the new one follows it
and drops no active entry (:func:`quipu.core.memory_index.check_next`) and inserting it are one
serialised step across processes; the primary key (tenant, scope, owner, version) backs it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import psycopg

from quipu.core.memory_index import (
    MemoryIndex,
    check_next,
    dump_body,
    load_index,
    redacted_body,
)
from quipu.core.records import Scope, ScopeRef
from quipu.core.scope_lease import LeaseRow, ScopeLease, decide
from quipu.storage.decode import decode_rows, loads
from quipu.storage.timecodec import from_micros

_COLUMNS = "tenant_id, scope, owner, version, built_at, source_mark, reason, body"
_PARTITION = "tenant_id = %s AND scope = %s AND owner = %s"


class IndexTables:
    """Needs the store's ``_conn()`` and ``_tx()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def index_put(self, index: MemoryIndex) -> MemoryIndex:
        ref = index.ref
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ref),))
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_index_versions WHERE {_PARTITION}"
                " ORDER BY version DESC LIMIT 1",
                _part(ref),
            ).fetchall()
            found = decode_rows(_index, rows, lambda r: r[3])
            check_next(found[0] if found else None, index)
            conn.execute(
                f"INSERT INTO memory_index_versions ({_COLUMNS})"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    *_part(ref),
                    index.version,
                    index.built_at,
                    index.source_mark,
                    index.reason,
                    dump_body(index),
                ),
            )
        return index

    def index_get(self, ref: ScopeRef, version: int | None) -> MemoryIndex | None:
        which = "ORDER BY version DESC LIMIT 1" if version is None else "AND version = %s"
        args = _part(ref) if version is None else (*_part(ref), version)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_index_versions WHERE {_PARTITION} {which}", args
            ).fetchall()
        found = decode_rows(_index, rows, lambda r: r[3])
        return found[0] if found else None

    def index_history(self, ref: ScopeRef, before: int | None, limit: int) -> list[MemoryIndex]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_index_versions WHERE {_PARTITION}"
                " AND version < %s ORDER BY version DESC LIMIT %s",
                (*_part(ref), 2**62 if before is None else before, limit),
            ).fetchall()
        return decode_rows(_index, rows, lambda r: r[3])

    def index_changed_scopes(
        self, tenant_id: str, after: datetime | None, until: datetime, limit: int
    ) -> list[tuple[ScopeRef, datetime]]:
        low = "" if after is None else " AND recorded_at > %s"
        args: tuple[Any, ...] = (tenant_id,) if after is None else (tenant_id, after)
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT scope, owner, max(recorded_at) FROM memory_versions"
                f" WHERE tenant_id = %s{low} AND recorded_at <= %s"
                " GROUP BY scope, owner ORDER BY 3 LIMIT %s",
                (*args, until, limit),
            ).fetchall()
        return [(ScopeRef(tenant_id, Scope(r[0]), r[1]), r[2]) for r in rows]

    def index_due(self, tenant_id: str, built_before: datetime, limit: int) -> list[ScopeRef]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT scope, owner FROM memory_index_versions WHERE tenant_id = %s"
                " GROUP BY scope, owner HAVING max(built_at) < %s LIMIT %s",
                (tenant_id, built_before, limit),
            ).fetchall()
        return [ScopeRef(tenant_id, Scope(r[0]), r[1]) for r in rows]

    def index_sweep_mark(self, tenant_id: str) -> datetime | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT swept_to FROM index_sweep_marks WHERE tenant_id = %s", (tenant_id,)
            ).fetchone()
        return None if row is None else row[0]

    def index_set_sweep_mark(self, tenant_id: str, at: datetime) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO index_sweep_marks (tenant_id, swept_to) VALUES (%s, %s)"
                " ON CONFLICT (tenant_id) DO UPDATE"
                " SET swept_to = greatest(index_sweep_marks.swept_to, excluded.swept_to)",
                (tenant_id, at),
            )

    def index_redact(self, tenant_id: str, memory_ids: Sequence[str]) -> int:
        ids = frozenset(memory_ids)
        if not ids:
            return 0
        changed = 0
        with self._tx() as conn:
            for memory_id in sorted(ids):
                rows = conn.execute(
                    "SELECT scope, owner, version, body FROM memory_index_versions"
                    " WHERE tenant_id = %s AND body LIKE %s",
                    (tenant_id, f'%"memory_id": "{memory_id}"%'),
                ).fetchall()
                for r in rows:
                    body = redacted_body(loads(r[3]), ids)
                    if body is None:
                        continue
                    conn.execute(
                        f"UPDATE memory_index_versions SET body = %s WHERE {_PARTITION}"
                        " AND version = %s",
                        (json.dumps(body, ensure_ascii=False, sort_keys=True), tenant_id,
                         r[0], r[1], r[2]),
                    )  # fmt: skip
                    changed += 1
        return changed

    def index_last_recalled(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, datetime]:
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT memory_id, max(at) FROM usage_events WHERE tenant_id = %s"
                " AND memory_id = ANY(%s) GROUP BY memory_id",
                (tenant_id, ids),
            ).fetchall()
        return {r[0]: from_micros(int(r[1])) for r in rows}  # usage_events.at is micros

    # -- the per-scope consolidation lease (issue 24, CONSOL-4) --------------------------------
    def consolidation_lease(
        self, ref: ScopeRef, holder: str, now: datetime, until: datetime, cooldown: timedelta
    ) -> ScopeLease:
        with self._tx() as conn:  # the row lock serialises requests across processes
            conn.execute(
                "INSERT INTO consolidation_leases (tenant_id, scope, owner, token)"
                " VALUES (%s, %s, %s, 0) ON CONFLICT (tenant_id, scope, owner) DO NOTHING",
                _part(ref),
            )
            row = conn.execute(
                "SELECT holder, token, expires_at, finished_at FROM consolidation_leases"
                f" WHERE {_PARTITION} FOR UPDATE",
                _part(ref),
            ).fetchone()
            found = None if row is None else LeaseRow(row[0], int(row[1]), row[2], row[3])
            lease = decide(found, now, cooldown)
            if lease.granted:
                conn.execute(
                    "UPDATE consolidation_leases SET holder = %s, token = %s, expires_at = %s"
                    f" WHERE {_PARTITION}",
                    (holder, lease.token, until, *_part(ref)),
                )
        return lease

    def consolidation_release(self, ref: ScopeRef, token: int, now: datetime) -> bool:
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE consolidation_leases SET holder = NULL, expires_at = NULL,"
                f" finished_at = %s WHERE {_PARTITION} AND token = %s AND holder IS NOT NULL",
                (now, *_part(ref), token),
            )
            return cur.rowcount == 1


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _lock_key(ref: ScopeRef) -> int:
    """A signed 64-bit advisory lock key for the partition's index rewriters."""
    raw = "\x1f".join(("memory_index", *_part(ref))).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def _index(r: Sequence[Any]) -> MemoryIndex:
    ref = ScopeRef(r[0], Scope(r[1]), r[2])
    return load_index(ref, int(r[3]), r[4], r[5], r[6], loads(r[7]))
