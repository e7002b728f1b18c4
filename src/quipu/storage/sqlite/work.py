"""Session turns, promotion watermarks, durable jobs and the model budget on SQLite (a mixin of
:class:`SQLiteStore`). Every state change is one ``BEGIN IMMEDIATE`` transaction, so several
worker processes sharing the file never claim the same job twice."""

from __future__ import annotations

import json
import sqlite3
import uuid
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

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
from quipu.storage.decode import loads
from quipu.storage.sqlite.rows import fetch_all
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros

_JOB_COLUMNS = (
    "job_id, tenant_id, kind, idempotency_key, payload, status, attempts, max_attempts,"
    " run_after, fencing_token, lease_owner, lease_expires_at, checkpoint, last_error, result,"
    " created_at, updated_at, finished_at"
)


#: What a deleted turn gave back: its session and bytes (as :func:`turn_bytes` counts them).
_RELEASED = (
    "tenant_id, owner, session_id, length(CAST(content AS BLOB)) + length(CAST(metadata AS BLOB))"
)


class WorkTables:
    """Needs ``_tx()`` and ``_reader()`` from the store."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
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
            if not self._prune_owner(key, created_at):
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
        with self._tx() as c:
            row = c.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM session_turns"
                " WHERE tenant_id = ? AND owner = ? AND session_id = ?",
                ident,
            ).fetchone()
            seq = int(row[0]) + 1
            held = c.execute(
                "SELECT turns FROM sessions WHERE tenant_id = ? AND owner = ? AND session_id = ?",
                ident,
            ).fetchone()
            owned = c.execute(
                "SELECT bytes FROM session_owners WHERE tenant_id = ? AND owner = ?",
                (key.tenant_id, key.owner),
            ).fetchone()
            check_bounds(
                0 if held is None else int(held[0]),
                0 if owned is None else int(owned[0]),
                size,
                bounds,
            )
            c.execute(
                "INSERT INTO session_turns (tenant_id, owner, session_id, seq, role, content,"
                " metadata, created_at, expires_at, observed_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *ident,
                    seq,
                    role,
                    content,
                    meta,
                    to_micros(created_at),
                    to_micros(expires_at),
                    None if observed_at is None else to_micros(observed_at),
                ),
            )
            c.execute(
                "INSERT INTO sessions (tenant_id, owner, session_id, turns, bytes, key_id, role,"
                " agent_id, user_id) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, owner, session_id) DO UPDATE SET"
                " turns = turns + 1, bytes = bytes + excluded.bytes, key_id = excluded.key_id,"
                " role = excluded.role, agent_id = excluded.agent_id, user_id = excluded.user_id",
                (*ident, size, writer.key_id, writer.role.value, writer.agent_id, writer.user_id),
            )
            c.execute(
                "INSERT INTO session_owners (tenant_id, owner, turns, bytes) VALUES (?, ?, 1, ?)"
                " ON CONFLICT (tenant_id, owner) DO UPDATE SET"
                " turns = turns + 1, bytes = bytes + excluded.bytes",
                (key.tenant_id, key.owner, size),
            )
        return seq

    def session_turns(
        self, key: SessionKey, after_seq: int, limit: int, now: datetime
    ) -> list[SessionTurn]:
        rows = fetch_all(  # a turn another tool wrote as invalid UTF-8 reads as U+FFFD
            self._reader(),
            "SELECT seq, role, content, metadata, created_at, expires_at, observed_at"
            " FROM session_turns WHERE tenant_id = ? AND owner = ? AND session_id = ? AND seq > ?"
            " AND expires_at > ? ORDER BY seq LIMIT ?",
            (key.tenant_id, key.owner, key.session_id, after_seq, to_micros(now), limit),
        )
        return [
            SessionTurn(
                key.session_id,
                r[0],
                r[1],
                r[2],
                loads(r[3]),
                from_micros(r[4]),
                from_micros(r[5]),
                from_micros_opt(r[6]),
            )
            for r in rows
        ]

    def prune_turns(self, now: datetime, limit: int) -> int:
        """Delete up to ``limit`` expired turns (the only physical delete of live data)."""
        with self._tx() as c:
            gone = c.execute(
                "DELETE FROM session_turns WHERE rowid IN (SELECT rowid FROM session_turns"
                f" WHERE expires_at <= ? LIMIT ?) RETURNING {_RELEASED}",
                (to_micros(now), limit),
            ).fetchall()
            _release(c, gone)
            return len(gone)

    def _prune_owner(self, key: SessionKey, now: datetime) -> int:
        """Delete the expired turns of one subject; how many went."""
        with self._tx() as c:
            gone = c.execute(
                "DELETE FROM session_turns WHERE tenant_id = ? AND owner = ? AND expires_at <= ?"
                f" RETURNING {_RELEASED}",
                (key.tenant_id, key.owner, to_micros(now)),
            ).fetchall()
            _release(c, gone)
            return len(gone)

    def idle_sessions(self, idle_before: datetime, now: datetime, limit: int) -> list[IdleSession]:
        retry = ",".join("?" * len(RETRY_LATER))
        rows = self._reader().execute(
            "WITH idle AS (SELECT tenant_id, owner, session_id, MAX(seq) AS last_seq,"
            " MAX(created_at) AS last_at, MIN(expires_at) AS expires_at FROM session_turns"
            " WHERE expires_at > ? GROUP BY tenant_id, owner, session_id"
            " HAVING MAX(created_at) <= ?),"
            " due AS (SELECT i.*, ROW_NUMBER() OVER (PARTITION BY i.tenant_id"
            " ORDER BY i.expires_at, i.owner, i.session_id) AS place FROM idle i"
            " LEFT JOIN session_watermarks w ON w.tenant_id = i.tenant_id"
            " AND w.owner = i.owner AND w.session_id = i.session_id"
            " WHERE w.last_seq IS NULL OR i.last_seq > w.last_seq"
            f" OR (w.status IN ({retry}) AND w.at <= ?))"
            " SELECT d.tenant_id, d.owner, d.session_id, d.last_seq, d.last_at, d.expires_at,"
            " s.key_id, s.role, s.agent_id, s.user_id FROM due d JOIN sessions s"
            " ON s.tenant_id = d.tenant_id AND s.owner = d.owner AND s.session_id = d.session_id"
            " ORDER BY d.place, d.expires_at, d.tenant_id, d.owner, d.session_id LIMIT ?",
            (to_micros(now), to_micros(idle_before), *RETRY_LATER, to_micros(idle_before), limit),
        )
        return [
            IdleSession(
                SessionKey(r[0], r[1], r[2]),
                r[3],
                from_micros(r[4]),
                from_micros(r[5]),
                Principal(r[0], r[6], Role(r[7]), agent_id=r[8], user_id=r[9], surface="sweep"),
            )
            for r in rows
        ]

    def get_watermark(self, key: SessionKey) -> Watermark | None:
        row = (
            self._reader()
            .execute(
                "SELECT fingerprint, last_seq, status, at, details FROM session_watermarks"
                " WHERE tenant_id = ? AND owner = ? AND session_id = ?",
                (key.tenant_id, key.owner, key.session_id),
            )
            .fetchone()
        )
        if row is None:
            return None
        return Watermark(row[0], row[1], row[2], from_micros(row[3]), json.loads(row[4]))

    def set_watermark(self, key: SessionKey, mark: Watermark) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO session_watermarks (tenant_id, owner, session_id, fingerprint,"
                " last_seq, status, at, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
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
                    to_micros(mark.at),
                    json.dumps(mark.details, sort_keys=True),
                ),
            )

    # -- jobs --------------------------------------------------------------------------------
    def enqueue_job(self, job: NewJob, now: datetime) -> tuple[Job, bool]:
        """(the job, created). An active job with the same key is returned instead."""
        with self._tx() as c:
            existing = c.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND kind = ?"
                " AND idempotency_key = ? AND status IN ('queued', 'running')",
                (job.tenant_id, job.kind, job.idempotency_key),
            ).fetchone()
            if existing is not None:
                return _job(existing), False
            return _insert_job(c, job, now), True

    def claim_job(
        self, kinds: list[str], worker: str, lease_until: datetime, now: datetime
    ) -> Job | None:
        """Take the oldest due job of ``kinds``: queued, or running with an expired lease (its
        worker died). The fencing token goes up, so the old holder can no longer finish it."""
        marks = ",".join("?" * len(kinds))
        at = to_micros(now)
        with self._tx() as c:
            row = c.execute(
                f"SELECT job_id FROM jobs WHERE kind IN ({marks}) AND ("
                " (status = 'queued' AND run_after <= ?)"
                " OR (status = 'running' AND lease_expires_at <= ?))"
                " ORDER BY run_after, created_at LIMIT 1",
                (*kinds, at, at),
            ).fetchone()
            if row is None:
                return None
            c.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1,"
                " fencing_token = fencing_token + 1, lease_owner = ?, lease_expires_at = ?,"
                " updated_at = ? WHERE job_id = ?",
                (worker, to_micros(lease_until), at, row[0]),
            )
            return _job(
                c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (row[0],)).fetchone()
            )

    def heartbeat_job(
        self,
        job_id: str,
        token: int,
        lease_until: datetime,
        checkpoint: dict[str, Any] | None,
        now: datetime,
    ) -> bool:
        with self._tx() as c:
            cur = c.execute(
                "UPDATE jobs SET lease_expires_at = ?, updated_at = ?,"
                " checkpoint = COALESCE(?, checkpoint) WHERE job_id = ? AND fencing_token = ?"
                " AND status = 'running'",
                (
                    to_micros(lease_until),
                    to_micros(now),
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
        with self._tx() as c:
            cur = c.execute(
                "UPDATE jobs SET status = ?, result = ?, last_error = ?, updated_at = ?,"
                " run_after = COALESCE(?, run_after), lease_owner = NULL, lease_expires_at = NULL,"
                " finished_at = CASE WHEN ? IN ('succeeded', 'failed') THEN ? END"
                " WHERE job_id = ? AND fencing_token = ? AND status = 'running'",
                (
                    status.value,
                    json.dumps(result or {}, sort_keys=True),
                    error,
                    to_micros(now),
                    None if run_after is None else to_micros(run_after),
                    status.value,
                    to_micros(now),
                    job_id,
                    token,
                ),
            )
            return cur.rowcount == 1

    def defer_job(
        self, job_id: str, token: int, now: datetime, run_after: datetime, result: dict[str, Any]
    ) -> bool:
        """Queue the job again at ``run_after`` and give back the attempt its claim took."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE jobs SET status = 'queued', result = ?, last_error = NULL,"
                " updated_at = ?, run_after = ?, lease_owner = NULL, lease_expires_at = NULL,"
                " attempts = MAX(attempts - 1, 0)"
                " WHERE job_id = ? AND fencing_token = ? AND status = 'running'",
                (
                    json.dumps(result, sort_keys=True),
                    to_micros(now),
                    to_micros(run_after),
                    job_id,
                    token,
                ),
            )
            return cur.rowcount == 1

    def cancel_job(self, job_id: str, now: datetime) -> Job | None:
        with self._tx() as c:
            c.execute(
                "UPDATE jobs SET status = 'cancelled', updated_at = ?, lease_owner = NULL,"
                " lease_expires_at = NULL, fencing_token = fencing_token + 1"
                " WHERE job_id = ? AND status IN ('queued', 'running')",
                (to_micros(now), job_id),
            )
            row = c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,))
            found = row.fetchone()
            return None if found is None else _job(found)

    def retry_job(self, job_id: str, now: datetime) -> Job | None:
        """Queue a failed or cancelled job again with a fresh attempt budget."""
        with self._tx() as c:
            c.execute(
                "UPDATE jobs SET status = 'queued', attempts = 0, run_after = ?, updated_at = ?,"
                " finished_at = NULL WHERE job_id = ? AND status IN ('failed', 'cancelled')"
                " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = jobs.tenant_id"
                " AND j.kind = jobs.kind AND j.idempotency_key = jobs.idempotency_key"
                " AND j.status IN ('queued', 'running'))",
                (to_micros(now), to_micros(now), job_id),
            )
            row = c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,))
            found = row.fetchone()
            return None if found is None else _job(found)

    def get_job(self, job_id: str) -> Job | None:
        row = (
            self._reader()
            .execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,))
            .fetchone()
        )
        return None if row is None else _job(row)

    def list_jobs(self, tenant_id: str | None, status: JobStatus | None, limit: int) -> list[Job]:
        where, params = ["1 = 1"], []
        if tenant_id is not None:
            where.append("tenant_id = ?")
            params.append(tenant_id)
        if status is not None:
            where.append("status = ?")
            params.append(status.value)
        rows = self._reader().execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC LIMIT ?",
            (*params, limit),
        )
        return [_job(r) for r in rows]

    def queue_stats(self) -> dict[str, tuple[int, datetime | None]]:
        rows = self._reader().execute(
            "SELECT status, COUNT(*), MIN(created_at) FROM jobs"
            " WHERE status IN ('queued', 'running') GROUP BY status"
        )
        found = {r[0]: (int(r[1]), from_micros(r[2])) for r in rows}
        return {s: found.get(s, (0, None)) for s in ("queued", "running")}

    def enqueue_bounded_job(
        self, job: NewJob, now: datetime, *, group: str, cap: int
    ) -> Job | None:
        """Queue ``job`` unless ``cap`` active jobs of its tenant and kind already have keys
        starting with ``group`` (None then); one transaction, so callers sharing the store
        share the bound (HARVEST-1)."""
        with self._tx() as c:
            (active,) = c.execute(
                "SELECT COUNT(*) FROM jobs WHERE tenant_id = ? AND kind = ?"
                " AND status IN ('queued', 'running') AND substr(idempotency_key, 1, ?) = ?",
                (job.tenant_id, job.kind, len(group), group),
            ).fetchone()
            if int(active) >= cap:
                return None
            return _insert_job(c, job, now)

    def count_active_jobs(self, kind: str, tenant_id: str | None = None) -> int:
        """Queued or running jobs of ``kind`` (of one tenant, or of all)."""
        where, params = "kind = ? AND status IN ('queued', 'running')", [kind]
        if tenant_id is not None:
            where += " AND tenant_id = ?"
            params.append(tenant_id)
        (n,) = self._reader().execute(f"SELECT COUNT(*) FROM jobs WHERE {where}", params).fetchone()
        return int(n)

    # -- rate limit --------------------------------------------------------------------------
    def take_rate_token(self, key_id: str, rate: float, burst: int, now: datetime) -> float:
        """Spend one token of ``key_id``'s bucket; 0.0 when admitted, else seconds to wait.
        One write transaction, so processes sharing the store share the bucket."""
        at = to_micros(now)
        with self._tx() as c:
            row = c.execute(
                "SELECT tokens, updated_at FROM rate_buckets WHERE key_id = ?", (key_id,)
            ).fetchone()
            if row is None:
                tokens, wait = spend(float(burst), 0.0, rate, burst)
            else:
                tokens, wait = spend(float(row[0]), (at - int(row[1])) / 1e6, rate, burst)
            c.execute(
                "INSERT INTO rate_buckets (key_id, tokens, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key_id) DO UPDATE SET tokens = excluded.tokens,"
                " updated_at = excluded.updated_at",
                (key_id, tokens, at),
            )
            return wait

    # -- model budget ------------------------------------------------------------------------
    def reserve_budget(self, tenant_id: str, window_start: datetime, limit: int) -> bool:
        """Take one model call from the tenant's window, atomically; False when spent."""
        with self._tx() as c:
            start = to_micros(window_start)
            row = c.execute(
                "SELECT used FROM model_budget WHERE tenant_id = ? AND window_start = ?",
                (tenant_id, start),
            ).fetchone()
            used = 0 if row is None else int(row[0])
            if used >= limit:
                return False
            c.execute(
                "INSERT INTO model_budget (tenant_id, window_start, used) VALUES (?, ?, 1)"
                " ON CONFLICT (tenant_id, window_start) DO UPDATE SET used = used + 1",
                (tenant_id, start),
            )
            return True

    def release_budget(self, tenant_id: str, window_start: datetime) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE model_budget SET used = used - 1"
                " WHERE tenant_id = ? AND window_start = ? AND used > 0",
                (tenant_id, to_micros(window_start)),
            )


def _release(c: sqlite3.Connection, gone: list[Any]) -> None:
    """Take deleted turns (rows of :data:`_RELEASED`) off the session and subject counters."""
    sessions: dict[tuple[str, str, str], list[int]] = {}
    for tenant, owner, session, size in gone:
        held = sessions.setdefault((tenant, owner, session), [0, 0])
        held[0] += 1
        held[1] += int(size)
    owners: dict[tuple[str, str], list[int]] = {}
    for (tenant, owner, _), (turns, size) in sessions.items():
        held = owners.setdefault((tenant, owner), [0, 0])
        held[0] += turns
        held[1] += size
    c.executemany(
        "UPDATE sessions SET turns = MAX(0, turns - ?), bytes = MAX(0, bytes - ?)"
        " WHERE tenant_id = ? AND owner = ? AND session_id = ?",
        [(turns, size, *ident) for ident, (turns, size) in sessions.items()],
    )
    c.executemany(
        "UPDATE session_owners SET turns = MAX(0, turns - ?), bytes = MAX(0, bytes - ?)"
        " WHERE tenant_id = ? AND owner = ?",
        [(turns, size, *ident) for ident, (turns, size) in owners.items()],
    )
    # A session with no turns left is gone: its watermark too, so a session id used again
    # (numbered from 1 again) is promoted again rather than hidden behind the old last_seq.
    for table in ("session_watermarks", "sessions"):
        c.executemany(
            f"DELETE FROM {table} WHERE tenant_id = ? AND owner = ? AND session_id = ?"
            " AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = ? AND s.owner = ?"
            " AND s.session_id = ? AND s.turns > 0)",
            [(*ident, *ident) for ident in sessions],
        )
    c.executemany(
        "DELETE FROM session_owners WHERE tenant_id = ? AND owner = ? AND turns = 0", list(owners)
    )


def _job(r: Any) -> Job:
    return Job(
        job_id=r[0],
        tenant_id=r[1],
        kind=r[2],
        idempotency_key=r[3],
        payload=json.loads(r[4]),
        status=JobStatus(r[5]),
        attempts=r[6],
        max_attempts=r[7],
        run_after=from_micros(r[8]),
        fencing_token=r[9],
        lease_owner=r[10],
        lease_expires_at=from_micros_opt(r[11]),
        checkpoint=json.loads(r[12]),
        last_error=r[13],
        result=json.loads(r[14]),
        created_at=from_micros(r[15]),
        updated_at=from_micros(r[16]),
        finished_at=from_micros_opt(r[17]),
    )


def _insert_job(c: sqlite3.Connection, job: NewJob, now: datetime) -> Job:
    job_id = uuid.uuid4().hex
    at = to_micros(now)
    c.execute(
        f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES"
        " (?, ?, ?, ?, ?, 'queued', 0, ?, ?, 0, NULL, NULL, '{}', NULL, '{}', ?, ?, NULL)",
        (
            job_id,
            job.tenant_id,
            job.kind,
            job.idempotency_key,
            json.dumps(job.payload, sort_keys=True),
            job.max_attempts,
            at,
            at,
            at,
        ),
    )
    return _job(
        c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    )
