"""The key/value plane on SQLite (a mixin of :class:`SQLiteStore`; KV-1).

Each write is one ``BEGIN IMMEDIATE`` transaction: the compare-and-set check, the quota count,
ending the current version, inserting the next one and the audit line all happen under the one
writer, so two writers of a key cannot both win.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from datetime import datetime

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
from quipu.storage.sqlite.control import insert_audit
from quipu.storage.subject import subject_rows
from quipu.storage.timecodec import FOREVER, from_micros, from_micros_opt, to_micros

_COLUMNS = (
    "tenant_id, scope, owner, key, version, value, status, actor, surface, agent_id, reason,"
    " recorded_at, ended_at"
)
_PARTITION = "tenant_id = ? AND scope = ? AND owner = ?"
#: One end user's partitions: its ``user`` scope and every ``agent_user`` scope of it.
SUBJECT_SQL = (
    "(scope = 'user' AND owner = ?) OR (scope = 'agent_user' AND instr(owner, char(31)) > 0"
    " AND substr(owner, instr(owner, char(31)) + 1) = ?)"
)


class KVTables:
    """Needs the store's ``_tx()`` and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
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
        with self._tx() as c:
            row = c.execute(
                f"SELECT version, status FROM kv_entries WHERE {_PARTITION} AND key = ?"
                " AND is_current = 1",
                (*_part(ref), change.key),
            ).fetchone()
            current = None if row is None else (int(row[0]), EntryStatus(row[1]))
            version = check_write(change, current, expected_version)
            revived = current is None or current[1] is not EntryStatus.SET
            if change.status is EntryStatus.SET and revived:
                live = c.execute(
                    f"SELECT count(*) FROM kv_entries WHERE {_PARTITION} AND is_current = 1"
                    " AND status = 'set'",
                    _part(ref),
                ).fetchone()[0]
                if int(live) >= quota:
                    raise quota_error(quota)
            at = to_micros(now)
            if current is not None:
                c.execute(
                    f"UPDATE kv_entries SET is_current = 0, ended_at = ? WHERE {_PARTITION}"
                    " AND key = ? AND version = ?",
                    (at, *_part(ref), change.key, current[0]),
                )
            entry = entry_of(ref, change, version, now)
            c.execute(
                f"INSERT INTO kv_entries ({_COLUMNS}, is_current)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
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
                    at,
                    None,
                ),
            )
            insert_audit(c, entry_audit(entry))
            return entry

    def kv_get(self, ref: ScopeRef, key: str, as_of: datetime | None) -> KVEntry | None:
        where, args = _when(as_of)
        row = (
            self._reader()
            .execute(
                f"SELECT {_COLUMNS} FROM kv_entries WHERE {_PARTITION} AND key = ? AND {where}",
                (*_part(ref), key, *args),
            )
            .fetchone()
        )
        return None if row is None else decode_row(_entry, row, key)

    def kv_history(self, ref: ScopeRef, key: str) -> list[KVEntry]:
        rows = (
            self._reader()
            .execute(
                f"SELECT {_COLUMNS} FROM kv_entries WHERE {_PARTITION} AND key = ?"
                " ORDER BY version",
                (*_part(ref), key),
            )
            .fetchall()
        )
        return decode_rows(_entry, rows, lambda r: r["key"])

    def kv_list(
        self, ref: ScopeRef, prefix: str, after: str | None, limit: int, as_of: datetime | None
    ) -> list[KVEntry]:
        when, args = _when(as_of)
        low = max(prefix, after + "\x01") if after is not None else prefix
        rows = (
            self._reader()
            .execute(
                f"SELECT {_COLUMNS} FROM kv_entries WHERE {_PARTITION} AND {when}"
                " AND status = 'set' AND key >= ? AND key < ? ORDER BY key LIMIT ?",
                (*_part(ref), *args, low, prefix + KEY_END, limit),
            )
            .fetchall()
        )
        return decode_rows(_entry, rows, lambda r: r["key"])

    def kv_erase(self, ref: ScopeRef, key: str, audit: AuditEvent) -> int:
        """Wipe the value and reason of every version of ``key`` and mark it erased; the audit
        lines about it keep no reason. Returns how many versions were wiped (0: no such key)."""
        admit(audit)
        with self._tx() as c:
            wiped = c.execute(
                f"UPDATE kv_entries SET value = NULL, reason = NULL, status = 'erased'"
                f" WHERE {_PARTITION} AND key = ?",
                (*_part(ref), key),
            ).rowcount
            if wiped:
                c.execute(
                    "UPDATE audit_log SET reason = NULL WHERE tenant_id = ?"
                    " AND action IN ('kv.set', 'kv.delete') AND target_ids = ?",
                    (ref.tenant_id, json.dumps([key])),
                )
                insert_audit(c, audit)
            return int(wiped)

    def kv_subject_keys(
        self, tenant_id: str, user_id: str, limit: int
    ) -> list[tuple[ScopeRef, str]]:
        """Up to ``limit`` keys not yet erased in ``user_id``'s ``user`` and ``agent_user``
        partitions (a subject erasure's next batch)."""
        rows = self._reader().execute(
            "SELECT DISTINCT scope, owner, key FROM kv_entries WHERE tenant_id = ?"
            f" AND status != 'erased' AND ({SUBJECT_SQL}) ORDER BY scope, owner, key LIMIT ?",
            (tenant_id, user_id, user_id, limit),
        )
        return subject_rows(tenant_id, user_id, rows)


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _when(as_of: datetime | None) -> tuple[str, tuple[int, ...]]:
    """The versions in force now (the current one) or at ``as_of``."""
    if as_of is None:
        return "is_current = 1", ()
    at = to_micros(as_of)
    return "recorded_at <= ? AND coalesce(ended_at, ?) > ?", (at, FOREVER, at)


def _entry(r: sqlite3.Row) -> KVEntry:
    return KVEntry(
        tenant_id=r["tenant_id"],
        scope=Scope(r["scope"]),
        owner=r["owner"],
        key=r["key"],
        version=int(r["version"]),
        value=None if r["value"] is None else loads(r["value"]),
        status=EntryStatus(r["status"]),
        actor=r["actor"],
        surface=r["surface"],
        agent_id=r["agent_id"],
        reason=r["reason"],
        recorded_at=from_micros(int(r["recorded_at"])),
        ended_at=from_micros_opt(r["ended_at"]),
    )
