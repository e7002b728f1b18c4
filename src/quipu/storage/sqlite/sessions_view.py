"""What the operator console reads of sessions on SQLite (a mixin of :class:`SQLiteStore`;
OPS-4): a tenant's sessions with their size, last turn and last promotion, the jobs of one
session, and the memories written in it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from quipu.core.jobs import Job
from quipu.core.records import MemoryVersion, ScopeRef
from quipu.core.sessions import SessionInfo, SessionKey
from quipu.storage.decode import decode_rows
from quipu.storage.sqlite.rows import COLUMNS, fetch_all, to_record
from quipu.storage.sqlite.work import _JOB_COLUMNS, _job
from quipu.storage.timecodec import from_micros_opt

_SEP = "\x1f"


class SessionViews:
    """Needs the store's ``_reader()``."""

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def list_sessions(
        self, tenant_id: str, agent: str | None, user: str | None, limit: int
    ) -> list[SessionInfo]:
        where, params = ["s.tenant_id = ?"], [tenant_id]
        if agent is not None and user is not None:
            where.append("s.owner = ?")
            params.append(f"{agent}{_SEP}{user}")
        elif agent is not None:  # the owners `agent\x1f...`: a range of the primary key
            where.append("s.owner >= ? AND s.owner < ?")
            params += [f"{agent}{_SEP}", f"{agent}\x20"]
        elif user is not None:
            where.append("substr(s.owner, instr(s.owner, char(31)) + 1) = ?")
            params.append(user)
        rows = self._reader().execute(
            "SELECT s.owner, s.session_id, s.turns, s.bytes, (SELECT MAX(t.created_at)"
            " FROM session_turns t WHERE t.tenant_id = s.tenant_id AND t.owner = s.owner"
            " AND t.session_id = s.session_id) AS last_at, w.status FROM sessions s"
            " LEFT JOIN session_watermarks w ON w.tenant_id = s.tenant_id AND w.owner = s.owner"
            f" AND w.session_id = s.session_id WHERE {' AND '.join(where)}"
            " ORDER BY last_at IS NULL, last_at DESC, s.owner, s.session_id LIMIT ?",
            (*params, limit),
        )
        return [
            SessionInfo(
                SessionKey(tenant_id, str(r[0]), str(r[1])),
                int(r[2]),
                int(r[3]),
                from_micros_opt(r[4]),
                r[5],
            )
            for r in rows
        ]

    def session_jobs(
        self, tenant_id: str, kind: str, idempotency_key: str, limit: int
    ) -> list[Job]:
        rows = self._reader().execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND kind = ?"
            " AND idempotency_key = ? ORDER BY created_at DESC LIMIT ?",
            (tenant_id, kind, idempotency_key, limit),
        )
        return [_job(r) for r in rows]

    def session_memories(
        self, refs: Sequence[ScopeRef], session_id: str, limit: int
    ) -> list[MemoryVersion]:
        found: list[Any] = []
        for ref in refs:  # each one partition of the session index (migration 0005)
            found += fetch_all(
                self._reader(),
                f"SELECT {COLUMNS} FROM memory_versions WHERE tenant_id = ? AND scope = ?"
                " AND owner = ? AND json_extract(provenance, '$.session_id') = ?"
                " AND is_current = 1 ORDER BY key LIMIT ?",
                (ref.tenant_id, ref.scope.value, ref.owner, session_id, limit),
            )
        found.sort(key=lambda r: r["key"])
        return decode_rows(to_record, found[:limit], lambda r: r["key"])
