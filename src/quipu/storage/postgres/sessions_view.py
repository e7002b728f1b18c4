"""What the operator console reads of sessions on PostgreSQL (a mixin of
:class:`PostgresStore`; OPS-4): a tenant's sessions with their size, last turn and last
promotion, the jobs of one session, and the memories written in it. Every query names the
tenant, so under Citus it is routed to the tenant's worker."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from quipu.core.jobs import Job
from quipu.core.records import MemoryVersion, ScopeRef
from quipu.core.sessions import SessionInfo, SessionKey
from quipu.storage.decode import decode_rows
from quipu.storage.postgres.rows import COLUMNS, to_record, utc_opt
from quipu.storage.postgres.work import _JOB_COLUMNS, _job

_SEP = "\x1f"


class SessionViews:
    """Needs ``_conn()`` (an autocommit connection)."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def list_sessions(
        self, tenant_id: str, agent: str | None, user: str | None, limit: int
    ) -> list[SessionInfo]:
        where, params = ["s.tenant_id = %s"], [tenant_id]
        if agent is not None and user is not None:
            where.append("s.owner = %s")
            params.append(f"{agent}{_SEP}{user}")
        elif agent is not None:
            where.append("split_part(s.owner, chr(31), 1) = %s")
            params.append(agent)
        elif user is not None:
            where.append("split_part(s.owner, chr(31), 2) = %s")
            params.append(user)
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT s.owner, s.session_id, s.turns, s.bytes, (SELECT MAX(t.created_at)"
                " FROM session_turns t WHERE t.tenant_id = s.tenant_id AND t.owner = s.owner"
                " AND t.session_id = s.session_id) AS last_at, w.status FROM sessions s"
                " LEFT JOIN session_watermarks w ON w.tenant_id = s.tenant_id"
                " AND w.owner = s.owner AND w.session_id = s.session_id"
                f" WHERE {' AND '.join(where)}"
                ' ORDER BY last_at DESC NULLS LAST, s.owner COLLATE "C", s.session_id COLLATE "C"'
                " LIMIT %s",
                (*params, limit),
            ).fetchall()
        return [
            SessionInfo(
                SessionKey(tenant_id, str(r[0]), str(r[1])),
                int(r[2]),
                int(r[3]),
                utc_opt(r[4]),
                r[5],
            )
            for r in rows
        ]

    def session_jobs(
        self, tenant_id: str, kind: str, idempotency_key: str, limit: int
    ) -> list[Job]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = %s AND kind = %s"
                " AND idempotency_key = %s ORDER BY created_at DESC, job_id LIMIT %s",
                (tenant_id, kind, idempotency_key, limit),
            ).fetchall()
        return [_job(r) for r in rows]

    def session_memories(
        self, refs: Sequence[ScopeRef], session_id: str, limit: int
    ) -> list[MemoryVersion]:
        found: list[Any] = []
        with self._conn() as conn:
            cursor = conn.cursor(binary=True)
            for ref in refs:  # each one partition of the session index (migration 0005)
                found += cursor.execute(
                    f"SELECT {COLUMNS} FROM memory_versions WHERE tenant_id = %s AND scope = %s"
                    " AND owner = %s AND provenance->>'session_id' = %s AND is_current"
                    " ORDER BY key LIMIT %s",
                    (ref.tenant_id, ref.scope.value, ref.owner, session_id, limit),
                ).fetchall()
        found.sort(key=lambda r: r[0])
        return decode_rows(to_record, found[:limit], lambda r: r[0])
