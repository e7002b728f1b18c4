"""Legal holds, snapshots, projects and tenant-wide reads on PostgreSQL (a mixin of
:class:`PostgresStore`; LIFE-4, LIFE-8, SCOPE-6, SCOPE-8): the governance plane's records, apart
from the erase itself (:mod:`.governance`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.governance import Hold, HoldKind, Project, Snapshot, SnapshotMember, SubjectInfo
from quipu.core.query import Cursor, Page
from quipu.core.records import Scope, Status
from quipu.errors import Conflict
from quipu.storage.admission import admit
from quipu.storage.decode import decode_rows
from quipu.storage.postgres.rows import COLUMNS, to_record, utc, utc_opt
from quipu.storage.timecodec import from_micros, to_micros

HOLD_COLUMNS = (
    "tenant_id, hold_id, kind, target, reason, created_by, created_at, released_by,"
    " released_at, release_reason"
)


class RegistryTables:
    """Needs ``_conn()`` (an autocommit connection) and ``_tx()`` (one transaction)."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    # -- holds -------------------------------------------------------------------------------
    def put_hold(self, hold: Hold) -> None:
        admit(hold)
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (hold_lock(hold.tenant_id),))
            conn.execute(
                f"INSERT INTO legal_holds ({HOLD_COLUMNS}) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s, NULL, NULL, NULL)",
                (
                    hold.tenant_id,
                    hold.hold_id,
                    hold.kind.value,
                    hold.target,
                    hold.reason,
                    hold.created_by,
                    hold.created_at,
                ),
            )

    def release_hold(
        self, tenant_id: str, hold_id: str, by: str, at: datetime, reason: str
    ) -> Hold | None:
        admit({"reason": reason, "released_by": by})
        with self._tx() as conn:
            row = conn.execute(
                "UPDATE legal_holds SET released_by = %s, released_at = %s, release_reason = %s"
                " WHERE tenant_id = %s AND hold_id = %s AND released_at IS NULL"
                f" RETURNING {HOLD_COLUMNS}",
                (by, at, reason, tenant_id, hold_id),
            ).fetchone()
        return None if row is None else hold_row(row)

    def list_holds(self, tenant_id: str, include_released: bool) -> list[Hold]:
        where = "" if include_released else " AND released_at IS NULL"
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {HOLD_COLUMNS} FROM legal_holds WHERE tenant_id = %s{where}"
                " ORDER BY created_at, hold_id",
                (tenant_id,),
            ).fetchall()
        return [hold_row(r) for r in rows]

    # -- snapshots (LIFE-8) ------------------------------------------------------------------
    def put_snapshot(self, snapshot: Snapshot) -> None:
        admit(snapshot)
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO snapshots (tenant_id, snapshot_id, label, created_by, created_at,"
                " members) VALUES (%s, %s, %s, %s, %s, %s::json)",
                (
                    snapshot.tenant_id,
                    snapshot.snapshot_id,
                    snapshot.label,
                    snapshot.created_by,
                    snapshot.created_at,
                    json.dumps([[m.id, m.version] for m in snapshot.members]),
                ),
            )

    def get_snapshot(self, tenant_id: str, snapshot_id: str) -> Snapshot | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT label, created_by, created_at, members FROM snapshots"
                " WHERE tenant_id = %s AND snapshot_id = %s",
                (tenant_id, snapshot_id),
            ).fetchone()
        if row is None:
            return None
        members = tuple(SnapshotMember(str(i), int(v)) for i, v in row[3])
        return Snapshot(tenant_id, snapshot_id, row[0], row[1], utc(row[2]), members)

    def export_snapshots(self, tenant_id: str | None) -> Iterator[Snapshot]:
        where, params = ("", ()) if tenant_id is None else (" WHERE tenant_id = %s", (tenant_id,))
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT tenant_id, snapshot_id, label, created_by, created_at, members"
                f" FROM snapshots{where} ORDER BY tenant_id, snapshot_id",
                params,
            ).fetchall()
        for r in rows:
            members = tuple(SnapshotMember(str(i), int(v)) for i, v in r[5])
            yield Snapshot(r[0], r[1], r[2], r[3], utc(r[4]), members)

    # -- projects (SCOPE-6) ------------------------------------------------------------------
    def put_project(self, project: Project) -> None:
        admit(project)
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO projects (tenant_id, project_id, name, created_by, created_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING project_id",
                (
                    project.tenant_id,
                    project.project_id,
                    project.name,
                    project.created_by,
                    project.created_at,
                ),
            ).fetchone()
        if row is None:
            raise Conflict(
                f"project {project.project_id} exists",
                code="project_exists",
                details={"project_id": project.project_id},
            )

    def list_projects(self, tenant_id: str) -> list[Project]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT project_id, name, created_by, created_at FROM projects"
                " WHERE tenant_id = %s ORDER BY project_id",
                (tenant_id,),
            ).fetchall()
        return [Project(tenant_id, r[0], r[1], r[2], utc(r[3])) for r in rows]

    def has_project(self, tenant_id: str, project_id: str) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT 1 FROM projects WHERE tenant_id = %s AND project_id = %s",
                (tenant_id, project_id),
            ).fetchone()
        return row is not None

    # -- tenant-wide reads (LIFE-5, LIFE-6, SCOPE-8) -----------------------------------------
    def list_subjects(
        self, tenant_id: str, after: tuple[str, str] | None, limit: int
    ) -> list[SubjectInfo]:
        scope, owner = after or ("", "")
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT scope, owner, live_count FROM scope_state WHERE tenant_id = %s"
                " AND (scope, owner) > (%s, %s) ORDER BY scope, owner LIMIT %s",
                (tenant_id, scope, owner, limit),
            ).fetchall()
        return [SubjectInfo(Scope(r[0]), str(r[1]), int(r[2])) for r in rows]

    def list_current(
        self, tenant_id: str, statuses: frozenset[Status], cursor: Cursor | None, limit: int
    ) -> Page:
        where = "tenant_id = %(t)s AND is_current AND status = ANY(%(s)s)"
        params: dict[str, Any] = {
            "t": tenant_id,
            "s": sorted(s.value for s in statuses),
            "limit": limit + 1,
        }
        if cursor is not None:
            try:
                params["c_at"] = from_micros(int(cursor.recorded_at))
            except (ValueError, OverflowError):
                return Page([], None)
            params["c_id"] = cursor.id
            where += " AND (recorded_at < %(c_at)s OR (recorded_at = %(c_at)s AND id < %(c_id)s))"
        with self._conn() as conn:
            rows = (
                conn.cursor(binary=True)
                .execute(
                    f"SELECT {COLUMNS} FROM memory_versions WHERE {where}"
                    " ORDER BY recorded_at DESC, id DESC LIMIT %(limit)s",
                    params,
                )
                .fetchall()
            )
        items = decode_rows(to_record, rows[:limit], lambda r: r[0])
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = Cursor(str(to_micros(utc(last[21]))), str(last[4])).encode()
        return Page(items, next_cursor)


def hold_lock(tenant_id: str) -> int:
    """The advisory lock between setting a tenant's holds and its erases checking them."""
    digest = hashlib.blake2b(f"legal-hold\x1f{tenant_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def active_holds(conn: psycopg.Connection[Any], tenant_id: str) -> list[Hold]:
    rows = conn.execute(
        f"SELECT {HOLD_COLUMNS} FROM legal_holds WHERE tenant_id = %s AND released_at IS NULL",
        (tenant_id,),
    ).fetchall()
    return [hold_row(r) for r in rows]


def hold_row(r: Sequence[Any]) -> Hold:
    return Hold(
        tenant_id=r[0],
        hold_id=r[1],
        kind=HoldKind(r[2]),
        target=r[3],
        reason=r[4],
        created_by=r[5],
        created_at=utc(r[6]),
        released_by=r[7],
        released_at=utc_opt(r[8]),
        release_reason=r[9],
    )
