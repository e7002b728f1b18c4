"""Placement by ontology on SQLite (a mixin of :class:`SQLiteStore`; GRAPH-2): the versioned
placement policy, and :meth:`PlacementTables.transaction`, which makes the memory row, its graph
mirror and the decision's audit event one ``BEGIN IMMEDIATE`` transaction."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime

from quipu.core.placement import Policy, from_body
from quipu.core.records import Scope, ScopeRef
from quipu.errors import Conflict
from quipu.storage.decode import loads
from quipu.storage.joined import join, joined_to
from quipu.storage.timecodec import from_micros, to_micros

_COLUMNS = "version, body, declared_by, declared_at, reason"


def _policy(row: sqlite3.Row) -> Policy:
    body = loads(row["body"])
    return from_body(
        body if isinstance(body, dict) else {},
        version=int(row["version"]),
        declared_by=row["declared_by"],
        declared_at=from_micros(int(row["declared_at"])),
        reason=row["reason"],
    )


class PlacementTables:
    """Needs the store's ``_tx()`` and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _drop_indexes(self) -> None:
        raise NotImplementedError

    def _forget_index(self, ref: ScopeRef) -> None:
        raise NotImplementedError

    _local: threading.local

    @contextmanager
    def transaction(self, tenant_id: str | None = None) -> Iterator[None]:
        """Every write this thread makes through the store inside the block commits as one
        (``tenant_id`` is for PostgreSQL's key prefix; SQLite needs none). Nested in an open
        block, it is a savepoint of it: a failure inside rolls back the inner block only."""
        joined = joined_to(self)
        if joined is None:
            try:
                with self._tx() as c, join(self, c):
                    yield
            finally:
                # scopes an erase changed inside the block: forgotten again now that it has
                # ended, in case a reader rebuilt one from the rows it replaced meanwhile
                for ref in self._local.__dict__.pop("forget_after", ()):
                    self._forget_index(ref)
            return
        joined.execute("SAVEPOINT nested")
        try:
            yield
        except BaseException:
            joined.execute("ROLLBACK TO nested")
            joined.execute("RELEASE nested")
            self._drop_indexes()  # they may hold rows the savepoint took back
            raise
        joined.execute("RELEASE nested")

    def placement_policy(self, tenant_id: str, version: int | None = None) -> Policy | None:
        where = "" if version is None else " AND version = ?"
        args = (tenant_id,) if version is None else (tenant_id, version)
        row = (
            self._reader()
            .execute(
                f"SELECT {_COLUMNS} FROM graph_placements WHERE tenant_id = ?{where}"
                " ORDER BY version DESC LIMIT 1",
                args,
            )
            .fetchone()
        )
        return None if row is None else _policy(row)

    def placement_declare(self, tenant_id: str, policy: Policy, expected: int | None) -> Policy:
        assert policy.declared_at is not None
        with self._tx() as c:
            row = c.execute(
                "SELECT COALESCE(MAX(version), 0) FROM graph_placements WHERE tenant_id = ?",
                (tenant_id,),
            ).fetchone()
            current = int(row[0])
            if expected is not None and expected != current:
                raise Conflict(
                    f"the placement policy is at version {current}, not {expected}",
                    code="version_conflict",
                    details={"current_version": current, "expected_version": expected},
                )
            c.execute(
                f"INSERT INTO graph_placements (tenant_id, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    tenant_id,
                    current + 1,
                    json.dumps(policy.body(), ensure_ascii=False),
                    policy.declared_by,
                    to_micros(policy.declared_at),
                    policy.reason,
                ),
            )
        return Policy(
            current + 1,
            policy.types,
            policy.isolated,
            policy.declared_by,
            policy.declared_at,
            policy.reason,
        )

    def placement_mark(
        self, tenant_id: str, memory_id: str, origin: Scope, policy_version: int, at: datetime
    ) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO graph_placed (tenant_id, memory_id, origin,"
                " policy_version, placed_at) VALUES (?, ?, ?, ?, ?)",
                (tenant_id, memory_id, origin.value, policy_version, to_micros(at)),
            )

    def placement_origin(self, tenant_id: str, memory_id: str) -> Scope | None:
        with self._tx() as c:  # the writer: inside transaction() it sees that write's rows
            row = c.execute(
                "SELECT origin FROM graph_placed WHERE tenant_id = ? AND memory_id = ?",
                (tenant_id, memory_id),
            ).fetchone()
        return None if row is None else Scope(row[0])
