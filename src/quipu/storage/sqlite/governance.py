"""Erase, legal holds, snapshots, projects and tenant-wide reads on SQLite (a mixin of
:class:`SQLiteStore`; LIFE-4..8, SCOPE-6, SCOPE-8).

Erased bytes leave the file: every connection runs with ``PRAGMA secure_delete=ON`` (freed
cells and pages are zeroed, not left in free space) and an erase ends with a WAL checkpoint
that truncates the WAL, so the old page images it held go with it (docs/data-lifecycle.md).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from quipu.core.auth import Actor, version_audit
from quipu.core.governance import (
    EraseReport,
    Erasure,
    Hold,
    HoldKind,
    Project,
    Snapshot,
    SnapshotMember,
    SubjectInfo,
    erased_provenance,
    session_subject,
    subject_of,
    tombstone,
)
from quipu.core.lifecycle import LIVE
from quipu.core.query import Cursor, Page
from quipu.core.records import MemoryVersion, Provenance, Relation, Scope, ScopeRef, Status
from quipu.core.versions import Change
from quipu.errors import Conflict, NotFound
from quipu.storage.admission import admit
from quipu.storage.base import Vector
from quipu.storage.decode import decode_rows, loads
from quipu.storage.joined import joined_to
from quipu.storage.sqlite.control import insert_audit
from quipu.storage.sqlite.rows import COLUMNS, INSERT_SQL, fetch_all, to_params, to_record
from quipu.storage.sqlite.work import _release
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros

_CHUNK = 500
_HOLD_COLUMNS = (
    "tenant_id, hold_id, kind, target, reason, created_by, created_at, released_by,"
    " released_at, release_reason"
)
_SEP = "\x1f"


class GovernanceTables:
    """Needs the store's connections, ``_bump()``, ``_forget_index()``, ``_current_row()`` and
    ``_append()``."""

    path: str
    _writer: sqlite3.Connection
    _write_lock: threading.Lock

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _bump(self, c: sqlite3.Connection, ref: ScopeRef, live_delta: int) -> int:
        raise NotImplementedError

    def _forget_index(self, ref: ScopeRef) -> None:
        raise NotImplementedError

    def _current_row(
        self, c: sqlite3.Connection, ref: ScopeRef, memory_id: str
    ) -> sqlite3.Row | None:
        raise NotImplementedError

    def _append(
        self,
        c: sqlite3.Connection,
        ref: ScopeRef,
        memory_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        now: datetime,
        quota: int,
        by: Actor,
    ) -> MemoryVersion:
        raise NotImplementedError

    def storage_bytes(self) -> int:
        raise NotImplementedError

    def merge(
        self,
        ref: ScopeRef,
        survivor_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        others: Sequence[str],
        now: datetime,
        *,
        by: Actor,
    ) -> MemoryVersion:
        admit(change)
        with self._tx() as c:
            for other in others:
                if self._current_row(c, ref, other) is None:
                    raise NotFound(f"no memory {other}", details={"id": other})
            merged = self._append(
                c, ref, survivor_id, change, expected_version, vector, embedding_key, now, 2**62, by
            )
            for other in others:
                gone = Change(
                    actor=change.actor,
                    relation=Relation.SUPERSEDED_BY,
                    reason=change.reason,
                    status=Status.SUPERSEDED,
                    invalid_at=now,
                    related_id=survivor_id,
                )
                self._append(c, ref, other, gone, None, None, None, now, 2**62, by)
            return merged

    def checkpoint(self) -> bool:
        """Copy the WAL into the file and truncate it to zero bytes, so page images from before
        an erase leave the disk; False when a reader kept it from completing (LIFE-4)."""
        if self.path == ":memory:":
            return True
        if joined_to(self) is not None:
            return False  # inside a transaction (it holds the lock): the caller runs it after
        with self._write_lock:
            row = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return row is not None and int(row[0]) == 0

    def reclaim(self) -> dict[str, object]:
        """Rewrite the file (VACUUM) and truncate the WAL: what ``quipu reclaim`` runs after
        erasing from a file written before secure delete was on (docs/data-lifecycle.md)."""
        before = self.storage_bytes()
        with self._write_lock:
            self._writer.execute("VACUUM")
        done = self.checkpoint()
        return {
            "backend": "sqlite",
            "bytes_before": before,
            "bytes_after": self.storage_bytes(),
            "wal_truncated": done,
        }

    # -- erase (LIFE-4) ----------------------------------------------------------------------
    def erase_families(
        self, tenant_id: str, memory_ids: Sequence[str], erasure: Erasure
    ) -> EraseReport:
        admit(erasure)
        report = EraseReport()
        with self._tx() as c:
            current = _in(
                c,
                f"SELECT {COLUMNS}, embedding_key, vector FROM memory_versions"
                " WHERE tenant_id = ? AND is_current = 1 AND status != 'erased' AND id IN ({})",
                (tenant_id,),
                list(dict.fromkeys(memory_ids)),
            )
            if not current:
                return report
            records = [to_record(r) for r in current]
            ids = [m.id for m in records]
            versions = _in(
                c,
                "SELECT key, id, text, provenance FROM memory_versions"
                " WHERE tenant_id = ? AND id IN ({})",
                (tenant_id,),
                ids,
            )
            texts = {str(r["text"]) for r in versions if r["text"]}
            texts |= {q for r in versions if (q := loads(r["provenance"]).get("quote"))}
            c.executemany(
                "UPDATE memory_versions SET text = '', tags = '[]', metadata = '{}',"
                " aliases = '[]', provenance = ?, reason = NULL, terms = '', vector = NULL,"
                " embedding_key = NULL, embedding_model = NULL WHERE key = ?",
                [(_erased_provenance(r["provenance"]), r["key"]) for r in versions],
            )
            report.add("memory_versions", len(versions))
            keys = [int(r["key"]) for r in versions]
            report.add("memory_aliases", _delete_in(c, "memory_aliases", "key", keys))
            live: dict[ScopeRef, int] = {}
            for row, memory in zip(current, records, strict=True):
                ref = ScopeRef(tenant_id, memory.scope, memory.owner)
                live[ref] = live.get(ref, 0) - int(memory.status in LIVE)
                c.execute(
                    "UPDATE memory_versions SET is_current = 0, valid_to = ? WHERE key = ?",
                    (to_micros(erasure.at), row["key"]),
                )
            report.add("audit_log", _scrub_audit(c, tenant_id, ids))
            report.add("jobs", _scrub_jobs(c, tenant_id, texts))
            for memory in records:  # after the scrub: the tombstone's audit line keeps its reason
                tomb = tombstone(memory, erasure)
                c.execute(INSERT_SQL, to_params(tomb, None, None, []))
                insert_audit(c, version_audit(tomb, erasure.by))
                report.families.append(memory.id)
            report.add("tombstones", len(records))
            for ref, delta in live.items():
                self._bump(c, ref, delta)  # no scope_log line: other processes reload the scope
        for ref in live:
            self._forget_index(ref)
        return report

    def subject_families(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        conn = self._reader()
        owners = [user_id] + [
            str(r[0])
            for r in conn.execute(
                "SELECT owner FROM scope_state WHERE tenant_id = ? AND scope = 'agent_user'"
                " AND substr(owner, instr(owner, char(31)) + 1) = ?",
                (tenant_id, user_id),
            )
        ]
        found: list[str] = []
        for owner in owners:
            scope = "user" if owner == user_id else "agent_user"
            found += [
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM memory_versions WHERE tenant_id = ? AND scope = ?"
                    " AND owner = ? AND is_current = 1 AND status != 'erased' LIMIT ?",
                    (tenant_id, scope, owner, limit - len(found)),
                )
            ]
            if len(found) >= limit:
                break
        return found

    def erase_subject_sessions(
        self, tenant_id: str, user_id: str, erasure: Erasure, limit: int
    ) -> EraseReport:
        report = EraseReport()
        with self._tx() as c:
            owners = [
                str(r[0])
                for r in c.execute(
                    "SELECT DISTINCT owner FROM sessions WHERE tenant_id = ?"
                    " AND instr(owner, char(31)) > 0"
                    " AND substr(owner, instr(owner, char(31)) + 1) = ?",
                    (tenant_id, user_id),
                )
            ]
            owners = [o for o in owners if session_subject(o) == user_id]
            if not owners:
                return report
            marks = ",".join("?" * len(owners))
            gone = c.execute(
                "DELETE FROM session_turns WHERE rowid IN (SELECT rowid FROM session_turns"
                f" WHERE tenant_id = ? AND owner IN ({marks}) LIMIT ?) RETURNING tenant_id,"
                " owner, session_id, length(CAST(content AS BLOB))"
                " + length(CAST(metadata AS BLOB))",
                (tenant_id, *owners, limit),
            ).fetchall()
            report.add("session_turns", len(gone))
            if len(gone) < limit:  # the last batch: what is left of these sessions goes too
                for table in ("session_watermarks", "sessions", "session_owners"):
                    count = c.execute(
                        f"DELETE FROM {table} WHERE tenant_id = ? AND owner IN ({marks})",
                        (tenant_id, *owners),
                    ).rowcount
                    report.add(table, count)
            else:
                _release(c, gone)
            report.add("jobs", _scrub_session_jobs(c, tenant_id, owners))
        return report

    def job_text_erase(
        self, tenant_id: str, *, job_id: str | None = None, user_id: str | None = None
    ) -> int:
        with self._tx() as c:
            return int(
                c.execute(
                    "UPDATE jobs SET payload = json_set(payload, '$.spans', json('[]'))"
                    " WHERE tenant_id = ? AND json_array_length(payload, '$.spans') > 0"
                    " AND (job_id = ? OR json_extract(payload, '$.user_id') = ?)",
                    (tenant_id, job_id, user_id),
                ).rowcount
            )

    def erase_holds(self, tenant_id: str) -> list[Hold]:
        c = joined_to(self)
        if c is None:
            raise RuntimeError("erase_holds reads inside the erase's transaction()")
        # The erase's BEGIN IMMEDIATE holds the write lock: no hold can be set until it ends.
        rows = c.execute(
            f"SELECT {_HOLD_COLUMNS} FROM legal_holds WHERE tenant_id = ? AND released_at IS NULL",
            (tenant_id,),
        ).fetchall()
        return [_hold(r) for r in rows]

    def blocking_holds(self, tenant_id: str, user_id: str | None) -> list[Hold]:
        conn = self._reader()
        rows = conn.execute(
            f"SELECT {_HOLD_COLUMNS} FROM legal_holds WHERE tenant_id = ? AND released_at IS NULL",
            (tenant_id,),
        ).fetchall()
        holds = [_hold(r) for r in rows]
        if user_id is None:
            return holds
        out = []
        for hold in holds:
            if hold.kind is HoldKind.TENANT or (
                hold.kind is HoldKind.SUBJECT and hold.target == user_id
            ):
                out.append(hold)
            elif hold.kind is HoldKind.MEMORY:
                found = conn.execute(
                    "SELECT scope, owner FROM memory_versions WHERE tenant_id = ? AND id = ?"
                    " AND is_current = 1",
                    (tenant_id, hold.target),
                ).fetchone()
                if found and subject_of(ScopeRef(tenant_id, Scope(found[0]), found[1])) == user_id:
                    out.append(hold)
        return out

    # -- holds -------------------------------------------------------------------------------
    def put_hold(self, hold: Hold) -> None:
        admit(hold)
        with self._tx() as c:
            c.execute(
                f"INSERT INTO legal_holds ({_HOLD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    hold.tenant_id,
                    hold.hold_id,
                    hold.kind.value,
                    hold.target,
                    hold.reason,
                    hold.created_by,
                    to_micros(hold.created_at),
                    None,
                    None,
                    None,
                ),
            )

    def release_hold(
        self, tenant_id: str, hold_id: str, by: str, at: datetime, reason: str
    ) -> Hold | None:
        admit({"reason": reason, "released_by": by})
        with self._tx() as c:
            row = c.execute(
                "UPDATE legal_holds SET released_by = ?, released_at = ?, release_reason = ?"
                " WHERE tenant_id = ? AND hold_id = ? AND released_at IS NULL"
                f" RETURNING {_HOLD_COLUMNS}",
                (by, to_micros(at), reason, tenant_id, hold_id),
            ).fetchone()
        return None if row is None else _hold(row)

    def list_holds(self, tenant_id: str, include_released: bool) -> list[Hold]:
        where = "" if include_released else " AND released_at IS NULL"
        rows = self._reader().execute(
            f"SELECT {_HOLD_COLUMNS} FROM legal_holds WHERE tenant_id = ?{where}"
            " ORDER BY created_at, hold_id",
            (tenant_id,),
        )
        return [_hold(r) for r in rows]

    # -- snapshots (LIFE-8) ------------------------------------------------------------------
    def put_snapshot(self, snapshot: Snapshot) -> None:
        admit(snapshot)
        with self._tx() as c:
            c.execute(
                "INSERT INTO snapshots (tenant_id, snapshot_id, label, created_by, created_at,"
                " members) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    snapshot.tenant_id,
                    snapshot.snapshot_id,
                    snapshot.label,
                    snapshot.created_by,
                    to_micros(snapshot.created_at),
                    json.dumps([[m.id, m.version] for m in snapshot.members]),
                ),
            )

    def get_snapshot(self, tenant_id: str, snapshot_id: str) -> Snapshot | None:
        row = (
            self._reader()
            .execute(
                "SELECT label, created_by, created_at, members FROM snapshots"
                " WHERE tenant_id = ? AND snapshot_id = ?",
                (tenant_id, snapshot_id),
            )
            .fetchone()
        )
        if row is None:
            return None
        members = tuple(SnapshotMember(str(i), int(v)) for i, v in loads(row[3]))
        return Snapshot(tenant_id, snapshot_id, row[0], row[1], from_micros(row[2]), members)

    def export_snapshots(self, tenant_id: str | None) -> Iterator[Snapshot]:
        where, params = ("", ()) if tenant_id is None else (" WHERE tenant_id = ?", (tenant_id,))
        rows = self._reader().execute(
            "SELECT tenant_id, snapshot_id, label, created_by, created_at, members"
            f" FROM snapshots{where} ORDER BY tenant_id, snapshot_id",
            params,
        )
        for r in rows:
            members = tuple(SnapshotMember(str(i), int(v)) for i, v in loads(r[5]))
            yield Snapshot(r[0], r[1], r[2], r[3], from_micros(r[4]), members)

    # -- projects (SCOPE-6) ------------------------------------------------------------------
    def put_project(self, project: Project) -> None:
        admit(project)
        with self._tx() as c:
            try:
                c.execute(
                    "INSERT INTO projects (tenant_id, project_id, name, created_by, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        project.tenant_id,
                        project.project_id,
                        project.name,
                        project.created_by,
                        to_micros(project.created_at),
                    ),
                )
            except sqlite3.IntegrityError:
                raise _project_exists(project.project_id) from None

    def list_projects(self, tenant_id: str) -> list[Project]:
        rows = self._reader().execute(
            "SELECT project_id, name, created_by, created_at FROM projects WHERE tenant_id = ?"
            " ORDER BY project_id",
            (tenant_id,),
        )
        return [Project(tenant_id, r[0], r[1], r[2], from_micros(r[3])) for r in rows]

    def has_project(self, tenant_id: str, project_id: str) -> bool:
        row = (
            self._reader()
            .execute(
                "SELECT 1 FROM projects WHERE tenant_id = ? AND project_id = ?",
                (tenant_id, project_id),
            )
            .fetchone()
        )
        return row is not None

    # -- tenant-wide reads (LIFE-5, LIFE-6, SCOPE-8) -----------------------------------------
    def list_subjects(
        self, tenant_id: str, after: tuple[str, str] | None, limit: int
    ) -> list[SubjectInfo]:
        scope, owner = after or ("", "")
        rows = self._reader().execute(
            "SELECT scope, owner, live_count FROM scope_state WHERE tenant_id = ?"
            " AND (scope > ? OR (scope = ? AND owner > ?)) ORDER BY scope, owner LIMIT ?",
            (tenant_id, scope, scope, owner, limit),
        )
        return [SubjectInfo(Scope(r[0]), str(r[1]), int(r[2])) for r in rows]

    def list_current(
        self, tenant_id: str, statuses: frozenset[Status], cursor: Cursor | None, limit: int
    ) -> Page:
        wanted = sorted(s.value for s in statuses)
        where = f"tenant_id = ? AND is_current = 1 AND status IN ({','.join('?' * len(wanted))})"
        params: list[Any] = [tenant_id, *wanted]
        if cursor is not None:
            where += " AND (recorded_at < ? OR (recorded_at = ? AND id < ?))"
            at = int(cursor.recorded_at) if cursor.recorded_at.lstrip("-").isdigit() else 0
            params += [at, at, cursor.id]
        rows = fetch_all(
            self._reader(),
            f"SELECT {COLUMNS} FROM memory_versions WHERE {where}"
            " ORDER BY recorded_at DESC, id DESC LIMIT ?",
            (*params, limit + 1),
        )
        items = decode_rows(to_record, rows[:limit], lambda r: r["key"])
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = Cursor(str(int(last["recorded_at"])), str(last["id"])).encode()
        return Page(items, next_cursor)


def _in(
    c: sqlite3.Connection, sql: str, before: tuple[Any, ...], values: Sequence[Any]
) -> list[sqlite3.Row]:
    """``sql`` (one ``IN ({})``) over ``values`` in chunks, rows of every chunk."""
    out: list[sqlite3.Row] = []
    for start in range(0, len(values), _CHUNK):
        part = list(values[start : start + _CHUNK])
        out += fetch_all(c, sql.format(",".join("?" * len(part))), (*before, *part))
    return out


def _delete_in(c: sqlite3.Connection, table: str, column: str, values: Sequence[Any]) -> int:
    count = 0
    for start in range(0, len(values), _CHUNK):
        part = list(values[start : start + _CHUNK])
        marks = ",".join("?" * len(part))
        count += c.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", part).rowcount
    return count


def _erased_provenance(raw: str) -> str:
    kept = erased_provenance(Provenance.from_dict(loads(raw)))
    return json.dumps(kept.to_dict(), sort_keys=True)


def _scrub_audit(c: sqlite3.Connection, tenant_id: str, ids: Sequence[str]) -> int:
    """Drop the reasons of audit lines about the erased families (they may quote them)."""
    count = 0
    for start in range(0, len(ids), _CHUNK):
        part = list(ids[start : start + _CHUNK])
        marks = ",".join("?" * len(part))
        count += c.execute(
            "UPDATE audit_log SET reason = NULL WHERE tenant_id = ? AND reason IS NOT NULL"
            f" AND EXISTS (SELECT 1 FROM json_each(target_ids) WHERE value IN ({marks}))",
            (tenant_id, *part),
        ).rowcount
    return count


def _scrub_jobs(c: sqlite3.Connection, tenant_id: str, texts: set[str]) -> int:
    """Clear the checkpoint, result and error of the tenant's jobs that quote any of ``texts``
    (a promotion's checkpoint holds the text of a planned supersede)."""
    if not texts:
        return 0
    needles = list(texts) + [json.dumps(t)[1:-1] for t in texts]
    hit = [
        str(r[0])
        for r in c.execute(
            "SELECT job_id, checkpoint, result, COALESCE(last_error, '') FROM jobs"
            " WHERE tenant_id = ? AND (checkpoint != '{}' OR result != '{}'"
            " OR last_error IS NOT NULL)",
            (tenant_id,),
        )
        if any(n in blob for blob in r[1:] for n in needles)
    ]
    c.executemany(
        "UPDATE jobs SET checkpoint = '{}', result = '{}', last_error = NULL WHERE job_id = ?",
        [(j,) for j in hit],
    )
    return len(hit)


def _scrub_session_jobs(c: sqlite3.Connection, tenant_id: str, owners: Sequence[str]) -> int:
    """Clear what the promotion jobs of these session owners kept: checkpoint, result, error."""
    count = 0
    for owner in owners:
        count += c.execute(
            "UPDATE jobs SET checkpoint = '{}', result = '{}', last_error = NULL"
            " WHERE tenant_id = ? AND kind = 'promote_session' AND idempotency_key LIKE ?"
            " ESCAPE '!' AND (checkpoint != '{}' OR result != '{}' OR last_error IS NOT NULL)",
            (tenant_id, _like_prefix(owner + _SEP)),
        ).rowcount
    return count


def _like_prefix(value: str) -> str:
    return value.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


def _hold(r: Any) -> Hold:
    return Hold(
        tenant_id=r[0],
        hold_id=r[1],
        kind=HoldKind(r[2]),
        target=r[3],
        reason=r[4],
        created_by=r[5],
        created_at=from_micros(r[6]),
        released_by=r[7],
        released_at=from_micros_opt(r[8]),
        release_reason=r[9],
    )


def _project_exists(project_id: str) -> Conflict:
    return Conflict(
        f"project {project_id} exists", code="project_exists", details={"project_id": project_id}
    )
