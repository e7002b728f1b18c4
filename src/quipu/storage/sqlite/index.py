"""The compiled memory index on SQLite (a mixin of :class:`SQLiteStore`; CONSOL-1, CONSOL-2).

A rewrite is one ``BEGIN IMMEDIATE`` transaction: reading the current version, checking that
the new one follows it and drops no active entry (:func:`quipu.core.memory_index.check_next`)
and inserting it happen under the one writer, so two builders cannot both win.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

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
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros, to_micros_opt

_COLUMNS = "tenant_id, scope, owner, version, built_at, source_mark, reason, body"
_PARTITION = "tenant_id = ? AND scope = ? AND owner = ?"


class IndexTables:
    """Needs the store's ``_tx()`` and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def index_put(self, index: MemoryIndex) -> MemoryIndex:
        ref = index.ref
        with self._tx() as c:
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM memory_index_versions WHERE {_PARTITION}"
                " ORDER BY version DESC LIMIT 1",
                _part(ref),
            ).fetchall()
            found = decode_rows(_index, rows, lambda r: r["version"])
            check_next(found[0] if found else None, index)
            c.execute(
                f"INSERT INTO memory_index_versions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *_part(ref),
                    index.version,
                    to_micros(index.built_at),
                    to_micros_opt(index.source_mark),
                    index.reason,
                    dump_body(index),
                ),
            )
        return index

    def index_get(self, ref: ScopeRef, version: int | None) -> MemoryIndex | None:
        which = "ORDER BY version DESC LIMIT 1" if version is None else "AND version = ?"
        args = _part(ref) if version is None else (*_part(ref), version)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_COLUMNS} FROM memory_index_versions WHERE {_PARTITION} {which}", args
            )
            .fetchall()
        )
        found = decode_rows(_index, rows, lambda r: r["version"])
        return found[0] if found else None

    def index_history(self, ref: ScopeRef, before: int | None, limit: int) -> list[MemoryIndex]:
        rows = (
            self._reader()
            .execute(
                f"SELECT {_COLUMNS} FROM memory_index_versions WHERE {_PARTITION}"
                " AND version < ? ORDER BY version DESC LIMIT ?",
                (*_part(ref), 2**62 if before is None else before, limit),
            )
            .fetchall()
        )
        return decode_rows(_index, rows, lambda r: r["version"])

    def index_changed_scopes(
        self, tenant_id: str, after: datetime | None, until: datetime, limit: int
    ) -> list[tuple[ScopeRef, datetime]]:
        rows = (
            self._reader()
            .execute(
                "SELECT scope, owner, max(recorded_at) FROM memory_versions"
                " WHERE tenant_id = ? AND recorded_at > ? AND recorded_at <= ?"
                " GROUP BY scope, owner ORDER BY 3 LIMIT ?",
                (tenant_id, -1 if after is None else to_micros(after), to_micros(until), limit),
            )
            .fetchall()
        )
        return [(ScopeRef(tenant_id, Scope(r[0]), r[1]), from_micros(r[2])) for r in rows]

    def index_due(self, tenant_id: str, built_before: datetime, limit: int) -> list[ScopeRef]:
        rows = (
            self._reader()
            .execute(
                "SELECT scope, owner FROM memory_index_versions WHERE tenant_id = ?"
                " GROUP BY scope, owner HAVING max(built_at) < ? LIMIT ?",
                (tenant_id, to_micros(built_before), limit),
            )
            .fetchall()
        )
        return [ScopeRef(tenant_id, Scope(r[0]), r[1]) for r in rows]

    def index_sweep_mark(self, tenant_id: str) -> datetime | None:
        row = (
            self._reader()
            .execute("SELECT swept_to FROM index_sweep_marks WHERE tenant_id = ?", (tenant_id,))
            .fetchone()
        )
        return None if row is None else from_micros(row[0])

    def index_set_sweep_mark(self, tenant_id: str, at: datetime) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO index_sweep_marks (tenant_id, swept_to) VALUES (?, ?) ON CONFLICT"
                " (tenant_id) DO UPDATE SET swept_to = max(swept_to, excluded.swept_to)",
                (tenant_id, to_micros(at)),
            )

    def index_redact(self, tenant_id: str, memory_ids: Sequence[str]) -> int:
        ids = frozenset(memory_ids)
        if not ids:
            return 0
        changed = 0
        with self._tx() as c:
            for memory_id in sorted(ids):
                rows = c.execute(
                    "SELECT scope, owner, version, body FROM memory_index_versions"
                    " WHERE tenant_id = ? AND body LIKE ?",
                    (tenant_id, _like(memory_id)),
                ).fetchall()
                for r in rows:
                    body = redacted_body(loads(r["body"]), ids)
                    if body is None:
                        continue
                    c.execute(
                        f"UPDATE memory_index_versions SET body = ? WHERE {_PARTITION}"
                        " AND version = ?",
                        (json.dumps(body, ensure_ascii=False, sort_keys=True), tenant_id,
                         r["scope"], r["owner"], r["version"]),
                    )  # fmt: skip
                    changed += 1
        return changed

    def index_last_recalled(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, datetime]:
        out: dict[str, datetime] = {}
        ids = list(dict.fromkeys(memory_ids))
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for r in (
                self._reader()
                .execute(
                    "SELECT memory_id, max(at) FROM usage_events WHERE tenant_id = ?"
                    f" AND memory_id IN ({marks}) GROUP BY memory_id",
                    (tenant_id, *part),
                )
                .fetchall()
            ):
                out[r[0]] = from_micros(r[1])
        return out

    # -- the per-scope consolidation lease (issue 24, CONSOL-4) --------------------------------
    def consolidation_lease(
        self, ref: ScopeRef, holder: str, now: datetime, until: datetime, cooldown: timedelta
    ) -> ScopeLease:
        with self._tx() as c:  # BEGIN IMMEDIATE: one writer decides at a time
            row = c.execute(
                "SELECT holder, token, expires_at, finished_at FROM consolidation_leases"
                f" WHERE {_PARTITION}",
                _part(ref),
            ).fetchone()
            found = None
            if row is not None:
                found = LeaseRow(
                    row[0], int(row[1]), from_micros_opt(row[2]), from_micros_opt(row[3])
                )
            lease = decide(found, now, cooldown)
            if lease.granted:
                c.execute(
                    "INSERT INTO consolidation_leases (tenant_id, scope, owner, holder, token,"
                    " expires_at) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (tenant_id, scope, owner) DO UPDATE SET holder = excluded.holder,"
                    " token = excluded.token, expires_at = excluded.expires_at",
                    (*_part(ref), holder, lease.token, to_micros(until)),
                )
        return lease

    def consolidation_release(self, ref: ScopeRef, token: int, now: datetime) -> bool:
        with self._tx() as c:
            cur = c.execute(
                "UPDATE consolidation_leases SET holder = NULL, expires_at = NULL,"
                f" finished_at = ? WHERE {_PARTITION} AND token = ? AND holder IS NOT NULL",
                (to_micros(now), *_part(ref), token),
            )
            return cur.rowcount == 1


def _like(memory_id: str) -> str:
    """The LIKE pattern of a memory id as :func:`dump_body` writes it (ids hold no % or _
    wildcard that matters: ``core.validate.ID_PATTERN``; an extra match is only re-read)."""
    return f'%"memory_id": "{memory_id}"%'


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _index(r: sqlite3.Row) -> MemoryIndex:
    ref = ScopeRef(r["tenant_id"], Scope(r["scope"]), r["owner"])
    return load_index(
        ref,
        int(r["version"]),
        from_micros(r["built_at"]),
        from_micros_opt(r["source_mark"]),
        r["reason"],
        loads(r["body"]),
    )
