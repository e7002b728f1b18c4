"""Session turns, promotion watermarks, durable jobs and the model budget on PostgreSQL (a mixin
of :class:`PostgresStore`). Claims use ``FOR UPDATE SKIP LOCKED``, so any number of worker
processes share the queue without claiming one job twice; the fencing token makes a late
finish by a worker whose lease expired a no-op (JOB-1)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.buckets import spend
from quipu.core.jobs import Job, JobStatus, NewJob
from quipu.core.records import Principal, Role
from quipu.core.sessions import (
    RETRY_LATER,
    IdleSession,
    SessionBounds,
    SessionKey,
    SessionTurn,
    Watermark,
    check_bounds,
    turn_bytes,
)
from quipu.errors import LimitExceeded
from quipu.storage.admission import admit_turn
from quipu.storage.postgres.rows import utc, utc_opt

_JOB_COLUMNS = (
    "job_id, tenant_id, kind, idempotency_key, payload, status, attempts, max_attempts,"
    " run_after, fencing_token, lease_owner, lease_expires_at, checkpoint, last_error, result,"
    " created_at, updated_at, finished_at"
)


class WorkTables:
    """Needs ``_conn()`` (an autocommit connection) and ``_tx()`` (one transaction)."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    # -- sessions ----------------------------------------------------------------------------
    def append_turn(
        self,
        key: SessionKey,
        writer: Principal,
        role: str,
        content: str,
        metadata: dict[str, Any],
        created_at: datetime,
        expires_at: datetime,
        bounds: SessionBounds,
        observed_at: datetime | None = None,
    ) -> SessionTurn:
        admit_turn(content, metadata)
        meta = json.dumps(metadata, sort_keys=True)
        try:
            seq = self._append_turn(
                key, writer, role, content, meta, created_at, expires_at, bounds, observed_at
            )
        except LimitExceeded:
            # A bound is reached: the subject's expired turns may still count; prune, try once.
            if not self._prune_owner(key.tenant_id, key.owner, created_at, None):
                raise
            seq = self._append_turn(
                key, writer, role, content, meta, created_at, expires_at, bounds, observed_at
            )
        return SessionTurn(
            key.session_id, seq, role, content, metadata, created_at, expires_at, observed_at
        )

    def _append_turn(
        self,
        key: SessionKey,
        writer: Principal,
        role: str,
        content: str,
        meta: str,
        created_at: datetime,
        expires_at: datetime,
        bounds: SessionBounds,
        observed_at: datetime | None = None,
    ) -> int:
        ident = (key.tenant_id, key.owner, key.session_id)
        size = turn_bytes(content, meta)
        with self._tx() as conn:
            # One subject's appends (and prunes) take turns: sequence numbers never collide and
            # the counters read below are the committed truth (READ COMMITTED re-reads them).
            _lock_owner(conn, key.tenant_id, key.owner)
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM session_turns"
                " WHERE tenant_id = %s AND owner = %s AND session_id = %s",
                ident,
            ).fetchone()
            seq = int(row[0]) + 1 if row else 1
            held = conn.execute(
                "SELECT turns FROM sessions WHERE tenant_id = %s AND owner = %s"
                " AND session_id = %s",
                ident,
            ).fetchone()
            owned = conn.execute(
                "SELECT bytes FROM session_owners WHERE tenant_id = %s AND owner = %s",
                (key.tenant_id, key.owner),
            ).fetchone()
            check_bounds(
                0 if held is None else int(held[0]),
                0 if owned is None else int(owned[0]),
                size,
                bounds,
            )
            conn.execute(
                "INSERT INTO session_turns (tenant_id, owner, session_id, seq, role, content,"
                " metadata, created_at, expires_at, observed_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (*ident, seq, role, content, meta, created_at, expires_at, observed_at),
            )
            conn.execute(
                "INSERT INTO sessions AS s (tenant_id, owner, session_id, turns, bytes, key_id,"
                " role, agent_id, user_id) VALUES (%s, %s, %s, 1, %s, %s, %s, %s, %s)"
                " ON CONFLICT (tenant_id, owner, session_id) DO UPDATE SET"
                " turns = s.turns + 1, bytes = s.bytes + excluded.bytes,"
                " key_id = excluded.key_id, role = excluded.role, agent_id = excluded.agent_id,"
                " user_id = excluded.user_id",
                (*ident, size, writer.key_id, writer.role.value, writer.agent_id, writer.user_id),
            )
            conn.execute(
                "INSERT INTO session_owners AS o (tenant_id, owner, turns, bytes)"
                " VALUES (%s, %s, 1, %s) ON CONFLICT (tenant_id, owner) DO UPDATE SET"
                " turns = o.turns + 1, bytes = o.bytes + excluded.bytes",
                (key.tenant_id, key.owner, size),
            )
        return seq

    def session_turns(
        self, key: SessionKey, after_seq: int, limit: int, now: datetime
    ) -> list[SessionTurn]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT seq, role, content, metadata, created_at, expires_at, observed_at"
                " FROM session_turns WHERE tenant_id = %s AND owner = %s AND session_id = %s"
                " AND seq > %s"
                " AND expires_at > %s ORDER BY seq LIMIT %s",
                (key.tenant_id, key.owner, key.session_id, after_seq, now, limit),
            ).fetchall()
        return [
            SessionTurn(key.session_id, r[0], r[1], r[2], r[3], utc(r[4]), utc(r[5]), utc_opt(r[6]))
            for r in rows
        ]

    def prune_turns(self, now: datetime, limit: int) -> int:
        """Delete up to ``limit`` expired turns (the only physical delete of live data), one
        subject per transaction under that subject's lock, as appends take it: a prune never
        waits on an append that waits on it."""
        with self._conn() as conn:
            owners = conn.execute(
                "SELECT DISTINCT tenant_id, owner FROM (SELECT tenant_id, owner FROM session_turns"
                " WHERE expires_at <= %s LIMIT %s) expired",
                (now, limit),
            ).fetchall()
        deleted = 0
        for tenant_id, owner in owners:
            if deleted >= limit:
                break
            deleted += self._prune_owner(tenant_id, owner, now, limit - deleted)
        return deleted

    def _prune_owner(self, tenant_id: str, owner: str, now: datetime, limit: int | None) -> int:
        """Delete expired turns of one subject (at most ``limit``); how many went."""
        with self._tx() as conn:
            _lock_owner(conn, tenant_id, owner)
            gone = conn.execute(
                "DELETE FROM session_turns WHERE (tenant_id, owner, session_id, seq) IN ("
                " SELECT tenant_id, owner, session_id, seq FROM session_turns"
                " WHERE tenant_id = %s AND owner = %s AND expires_at <= %s LIMIT %s)"
                " RETURNING session_id, octet_length(content) + octet_length(metadata::text)",
                (tenant_id, owner, now, limit),
            ).fetchall()
            _release(conn, tenant_id, owner, gone)
            return len(gone)

    def idle_sessions(self, idle_before: datetime, now: datetime, limit: int) -> list[IdleSession]:
        with self._conn() as conn:
            rows = conn.execute(
                "WITH idle AS (SELECT tenant_id, owner, session_id, MAX(seq) AS last_seq,"
                " MAX(created_at) AS last_at, MIN(expires_at) AS expires_at FROM session_turns"
                " WHERE expires_at > %(now)s GROUP BY tenant_id, owner, session_id"
                " HAVING MAX(created_at) <= %(idle)s),"
                " due AS (SELECT i.*, s.key_id, s.role, s.agent_id, s.user_id,"
                " row_number() OVER (PARTITION BY i.tenant_id"
                " ORDER BY i.expires_at, i.owner, i.session_id) AS place"
                " FROM idle i JOIN sessions s ON s.tenant_id = i.tenant_id"
                " AND s.owner = i.owner AND s.session_id = i.session_id"
                " LEFT JOIN session_watermarks w ON w.tenant_id = i.tenant_id"
                " AND w.owner = i.owner AND w.session_id = i.session_id"
                " WHERE w.last_seq IS NULL OR i.last_seq > w.last_seq"
                " OR (w.status = ANY(%(retry)s) AND w.at <= %(idle)s))"
                " SELECT tenant_id, owner, session_id, last_seq, last_at, expires_at, key_id,"
                " role, agent_id, user_id FROM due"
                " ORDER BY place, expires_at, tenant_id, owner, session_id LIMIT %(limit)s",
                {"now": now, "idle": idle_before, "retry": list(RETRY_LATER), "limit": limit},
            ).fetchall()
        return [
            IdleSession(
                SessionKey(r[0], r[1], r[2]),
                int(r[3]),
                utc(r[4]),
                utc(r[5]),
                Principal(r[0], r[6], Role(r[7]), agent_id=r[8], user_id=r[9], surface="sweep"),
            )
            for r in rows
        ]

    def get_watermark(self, key: SessionKey) -> Watermark | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT fingerprint, last_seq, status, at, details FROM session_watermarks"
                " WHERE tenant_id = %s AND owner = %s AND session_id = %s",
                (key.tenant_id, key.owner, key.session_id),
            ).fetchone()
        if row is None:
            return None
        return Watermark(row[0], int(row[1]), row[2], utc(row[3]), row[4])

    def set_watermark(self, key: SessionKey, mark: Watermark) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO session_watermarks (tenant_id, owner, session_id, fingerprint,"
                " last_seq, status, at, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (tenant_id, owner, session_id) DO UPDATE SET"
                " fingerprint = excluded.fingerprint, last_seq = excluded.last_seq,"
                " status = excluded.status, at = excluded.at, details = excluded.details",
                (
                    key.tenant_id,
                    key.owner,
                    key.session_id,
                    mark.fingerprint,
                    mark.last_seq,
                    mark.status,
                    mark.at,
                    json.dumps(mark.details, sort_keys=True),
                ),
            )

    # -- jobs --------------------------------------------------------------------------------
    def enqueue_job(self, job: NewJob, now: datetime) -> tuple[Job, bool]:
        """(the job, created). An active job with the same key is returned instead."""
        with self._tx() as conn:
            row = _insert_job(conn, job, now)
            if row is not None:
                return _job(row), True
            existing = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = %s AND kind = %s"
                " AND idempotency_key = %s AND status IN ('queued', 'running')",
                (job.tenant_id, job.kind, job.idempotency_key),
            ).fetchone()
            assert existing is not None
            return _job(existing), False

    def claim_job(
        self, kinds: list[str], worker: str, lease_until: datetime, now: datetime
    ) -> Job | None:
        """Take the oldest due job of ``kinds``: queued, or running with an expired lease (its
        worker died). The fencing token goes up, so the old holder can no longer finish it."""
        with self._tx() as conn:
            row = conn.execute(
                "SELECT job_id FROM jobs WHERE kind = ANY(%s) AND ("
                " (status = 'queued' AND run_after <= %s)"
                " OR (status = 'running' AND lease_expires_at <= %s))"
                " ORDER BY run_after, created_at LIMIT 1 FOR UPDATE SKIP LOCKED",
                (kinds, now, now),
            ).fetchone()
            if row is None:
                return None
            claimed = conn.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1,"
                " fencing_token = fencing_token + 1, lease_owner = %s, lease_expires_at = %s,"
                f" updated_at = %s WHERE job_id = %s RETURNING {_JOB_COLUMNS}",
                (worker, lease_until, now, row[0]),
            ).fetchone()
            return None if claimed is None else _job(claimed)

    def heartbeat_job(
        self,
        job_id: str,
        token: int,
        lease_until: datetime,
        checkpoint: dict[str, Any] | None,
        now: datetime,
    ) -> bool:
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE jobs SET lease_expires_at = %s, updated_at = %s,"
                " checkpoint = COALESCE(%s::json, checkpoint) WHERE job_id = %s"
                " AND fencing_token = %s AND status = 'running'",
                (
                    lease_until,
                    now,
                    None if checkpoint is None else json.dumps(checkpoint, sort_keys=True),
                    job_id,
                    token,
                ),
            )
            return cur.rowcount == 1

    def finish_job(
        self,
        job_id: str,
        token: int,
        status: JobStatus,
        now: datetime,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        run_after: datetime | None = None,
    ) -> bool:
        """Record an outcome, only for the current lease holder. ``status`` QUEUED with a
        ``run_after`` is a retry with backoff."""
        finished = now if status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = %s, result = %s, last_error = %s, updated_at = %s,"
                " run_after = COALESCE(%s, run_after), lease_owner = NULL,"
                " lease_expires_at = NULL, finished_at = %s"
                " WHERE job_id = %s AND fencing_token = %s AND status = 'running'",
                (
                    status.value,
                    json.dumps(result or {}, sort_keys=True),
                    error,
                    now,
                    run_after,
                    finished,
                    job_id,
                    token,
                ),
            )
            return cur.rowcount == 1

    def defer_job(
        self, job_id: str, token: int, now: datetime, run_after: datetime, result: dict[str, Any]
    ) -> bool:
        """Queue the job again at ``run_after`` and give back the attempt its claim took."""
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'queued', result = %s, last_error = NULL,"
                " updated_at = %s, run_after = %s, lease_owner = NULL, lease_expires_at = NULL,"
                " attempts = GREATEST(attempts - 1, 0)"
                " WHERE job_id = %s AND fencing_token = %s AND status = 'running'",
                (json.dumps(result, sort_keys=True), now, run_after, job_id, token),
            )
            return cur.rowcount == 1

    def cancel_job(self, job_id: str, now: datetime) -> Job | None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE jobs SET status = 'cancelled', updated_at = %s, lease_owner = NULL,"
                " lease_expires_at = NULL, fencing_token = fencing_token + 1"
                " WHERE job_id = %s AND status IN ('queued', 'running')",
                (now, job_id),
            )
            found = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = %s", (job_id,)
            ).fetchone()
            return None if found is None else _job(found)

    def retry_job(self, job_id: str, now: datetime) -> Job | None:
        """Queue a failed or cancelled job again with a fresh attempt budget."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE jobs SET status = 'queued', attempts = 0, run_after = %s,"
                " updated_at = %s, finished_at = NULL"
                " WHERE job_id = %s AND status IN ('failed', 'cancelled')"
                " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = jobs.tenant_id"
                " AND j.kind = jobs.kind AND j.idempotency_key = jobs.idempotency_key"
                " AND j.status IN ('queued', 'running'))",
                (now, now, job_id),
            )
            found = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = %s", (job_id,)
            ).fetchone()
            return None if found is None else _job(found)

    def get_job(self, job_id: str) -> Job | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = %s", (job_id,)
            ).fetchone()
        return None if row is None else _job(row)

    def list_jobs(self, tenant_id: str | None, status: JobStatus | None, limit: int) -> list[Job]:
        where, params = ["true"], []
        if tenant_id is not None:
            where.append("tenant_id = %s")
            params.append(tenant_id)
        if status is not None:
            where.append("status = %s")
            params.append(status.value)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {' AND '.join(where)}"
                " ORDER BY created_at DESC, job_id LIMIT %s",
                (*params, limit),
            ).fetchall()
        return [_job(r) for r in rows]

    def queue_stats(self) -> dict[str, tuple[int, datetime | None]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT status, COUNT(*), MIN(created_at) FROM jobs"
                " WHERE status IN ('queued', 'running') GROUP BY status"
            ).fetchall()
        found = {r[0]: (int(r[1]), r[2]) for r in rows}
        return {s: found.get(s, (0, None)) for s in ("queued", "running")}

    def enqueue_bounded_job(
        self, job: NewJob, now: datetime, *, group: str, cap: int
    ) -> Job | None:
        """Queue ``job`` unless ``cap`` active jobs of its tenant and kind already have keys
        starting with ``group`` (None then). A transaction-scoped advisory lock on the group
        serialises the count and the insert across connections (HARVEST-1)."""
        with self._tx() as conn:
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{job.tenant_id}\x1f{job.kind}\x1f{group}",),
            )
            row = conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE tenant_id = %s AND kind = %s"
                " AND status IN ('queued', 'running') AND substr(idempotency_key, 1, %s) = %s",
                (job.tenant_id, job.kind, len(group), group),
            ).fetchone()
            if row is not None and int(row[0]) >= cap:
                return None
            created = _insert_job(conn, job, now)
            return None if created is None else _job(created)

    def count_active_jobs(self, kind: str, tenant_id: str | None = None) -> int:
        """Queued or running jobs of ``kind`` (of one tenant, or of all)."""
        where, params = "kind = %s AND status IN ('queued', 'running')", [kind]
        if tenant_id is not None:
            where += " AND tenant_id = %s"
            params.append(tenant_id)
        with self._conn() as conn:
            row = conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {where}", params).fetchone()
        return 0 if row is None else int(row[0])

    # -- per-key rate limit ------------------------------------------------------------------
    def take_rate_token(self, key_id: str, rate: float, burst: int, now: datetime) -> float:
        """Spend one token of ``key_id``'s bucket; 0.0 when admitted, else seconds to wait.
        The bucket row is locked for the read-modify-write, so every process shares it."""
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO rate_buckets (key_id, tokens, updated_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (key_id) DO NOTHING",
                (key_id, float(burst), now),
            )
            row = conn.execute(
                "SELECT tokens, updated_at FROM rate_buckets WHERE key_id = %s FOR UPDATE",
                (key_id,),
            ).fetchone()
            assert row is not None
            tokens, wait = spend(float(row[0]), (now - row[1]).total_seconds(), rate, burst)
            conn.execute(
                "UPDATE rate_buckets SET tokens = %s, updated_at = GREATEST(updated_at, %s)"
                " WHERE key_id = %s",
                (tokens, now, key_id),
            )
            return wait

    # -- model budget ------------------------------------------------------------------------
    def reserve_budget(self, tenant_id: str, window_start: datetime, limit: int) -> bool:
        """Take one model call from the tenant's window, atomically; False when spent."""
        if limit <= 0:
            return False
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO model_budget AS b (tenant_id, window_start, used)"
                " VALUES (%s, %s, 1) ON CONFLICT (tenant_id, window_start)"
                " DO UPDATE SET used = b.used + 1 WHERE b.used < %s RETURNING used",
                (tenant_id, window_start, limit),
            ).fetchone()
            return row is not None

    def release_budget(self, tenant_id: str, window_start: datetime) -> None:
        with self._tx() as conn:
            conn.execute(
                "UPDATE model_budget SET used = used - 1"
                " WHERE tenant_id = %s AND window_start = %s AND used > 0",
                (tenant_id, window_start),
            )


def _lock_owner(conn: psycopg.Connection[Any], tenant_id: str, owner: str) -> None:
    """Serialise the session writes of one subject (appends and prunes) in this transaction."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        ("\x1f".join(("session-owner", tenant_id, owner)),),
    )


def _release(
    conn: psycopg.Connection[Any], tenant_id: str, owner: str, gone: Sequence[Sequence[Any]]
) -> None:
    """Take deleted turns of one subject, (session_id, bytes) rows, off its counters."""
    if not gone:
        return
    sessions: dict[str, list[int]] = {}
    for session_id, size in gone:
        held = sessions.setdefault(session_id, [0, 0])
        held[0] += 1
        held[1] += int(size)
    for session_id, (turns, size) in sorted(sessions.items()):
        conn.execute(
            "UPDATE sessions SET turns = GREATEST(0, turns - %s), bytes = GREATEST(0, bytes - %s)"
            " WHERE tenant_id = %s AND owner = %s AND session_id = %s",
            (turns, size, tenant_id, owner, session_id),
        )
    conn.execute(
        "UPDATE session_owners SET turns = GREATEST(0, turns - %s),"
        " bytes = GREATEST(0, bytes - %s) WHERE tenant_id = %s AND owner = %s",
        (len(gone), sum(s for _, s in sessions.values()), tenant_id, owner),
    )
    # A session with no turns left is gone: its watermark too, so a session id used again
    # (numbered from 1 again) is promoted again rather than hidden behind the old last_seq.
    emptied = [
        r[0]
        for r in conn.execute(
            "DELETE FROM sessions WHERE tenant_id = %s AND owner = %s AND session_id = ANY(%s)"
            " AND turns = 0 RETURNING session_id",
            (tenant_id, owner, sorted(sessions)),
        ).fetchall()
    ]
    if emptied:
        conn.execute(
            "DELETE FROM session_watermarks WHERE tenant_id = %s AND owner = %s"
            " AND session_id = ANY(%s)",
            (tenant_id, owner, emptied),
        )
    conn.execute(
        "DELETE FROM session_owners WHERE tenant_id = %s AND owner = %s AND turns = 0",
        (tenant_id, owner),
    )


def _job(r: Sequence[Any]) -> Job:
    return Job(
        job_id=r[0],
        tenant_id=r[1],
        kind=r[2],
        idempotency_key=r[3],
        payload=r[4],
        status=JobStatus(r[5]),
        attempts=int(r[6]),
        max_attempts=int(r[7]),
        run_after=utc(r[8]),
        fencing_token=int(r[9]),
        lease_owner=r[10],
        lease_expires_at=utc_opt(r[11]),
        checkpoint=r[12],
        last_error=r[13],
        result=r[14],
        created_at=utc(r[15]),
        updated_at=utc(r[16]),
        finished_at=utc_opt(r[17]),
    )


def _insert_job(conn: psycopg.Connection[Any], job: NewJob, now: datetime) -> Sequence[Any] | None:
    """Insert ``job`` queued; the row, or None when an active job has its key already (the one
    INSERT of :meth:`WorkTables.enqueue_job` and :meth:`WorkTables.enqueue_bounded_job`)."""
    return conn.execute(
        f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES (%s, %s, %s, %s, %s, 'queued', 0, %s,"
        " %s, 0, NULL, NULL, '{}', NULL, '{}', %s, %s, NULL)"
        " ON CONFLICT (tenant_id, kind, idempotency_key)"
        " WHERE status IN ('queued', 'running') DO NOTHING"
        f" RETURNING {_JOB_COLUMNS}",
        (
            uuid.uuid4().hex,
            job.tenant_id,
            job.kind,
            job.idempotency_key,
            json.dumps(job.payload, sort_keys=True),
            job.max_attempts,
            now,
            now,
            now,
        ),
    ).fetchone()
