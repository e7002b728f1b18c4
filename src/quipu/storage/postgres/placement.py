"""Placement by ontology on PostgreSQL (a mixin of :class:`PostgresStore`; GRAPH-2): the
versioned placement policy, and :meth:`PlacementTables.transaction`, which makes the memory
row, its graph mirror and the decision's audit event one transaction (the store's nested
``conn.transaction()`` blocks become savepoints inside it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from quipu.core.placement import Policy, from_body
from quipu.core.records import Scope
from quipu.errors import Conflict
from quipu.storage.joined import join, joined_to

_COLUMNS = "version, body, declared_by, declared_at, reason"


def _policy(row: Sequence[Any]) -> Policy:
    body = row[1]
    return from_body(
        body if isinstance(body, dict) else {},
        version=int(row[0]),
        declared_by=row[2],
        declared_at=row[3],
        reason=row[4],
    )


class PlacementTables:
    """Needs the store's ``_conn()`` and ``_tenant_number()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tenant_number(self, tenant_id: str) -> int:
        raise NotImplementedError

    @contextmanager
    def transaction(self, tenant_id: str | None = None) -> Iterator[None]:
        """Every write this thread makes through the store inside the block commits as one.
        ``tenant_id``: register the tenant's key prefix first (it commits on its own)."""
        if tenant_id is not None:
            self._tenant_number(tenant_id)
        joined = joined_to(self)
        if joined is not None:  # nested in an open block: a savepoint of it (issue 24)
            with joined.transaction():
                yield
            return
        with self._conn() as conn, conn.transaction(), join(self, conn):
            yield

    def placement_policy(self, tenant_id: str, version: int | None = None) -> Policy | None:
        where = "" if version is None else " AND version = %s"
        args = (tenant_id,) if version is None else (tenant_id, version)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM graph_placements WHERE tenant_id = %s{where}"
                " ORDER BY version DESC LIMIT 1",
                args,
            ).fetchone()
        return None if row is None else _policy(row)

    def placement_declare(self, tenant_id: str, policy: Policy, expected: int | None) -> Policy:
        assert policy.declared_at is not None
        with self._conn() as conn, conn.transaction():
            # one declaration at a time per tenant: the lock ends with the transaction
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 75))", (tenant_id,))
            row = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM graph_placements WHERE tenant_id = %s",
                (tenant_id,),
            ).fetchone()
            current = int(row[0]) if row is not None else 0
            if expected is not None and expected != current:
                raise Conflict(
                    f"the placement policy is at version {current}, not {expected}",
                    code="version_conflict",
                    details={"current_version": current, "expected_version": expected},
                )
            conn.execute(
                f"INSERT INTO graph_placements (tenant_id, {_COLUMNS})"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    tenant_id,
                    current + 1,
                    Jsonb(policy.body()),
                    policy.declared_by,
                    policy.declared_at,
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
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO graph_placed (tenant_id, memory_id, origin, policy_version,"
                " placed_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant_id, memory_id, origin.value, policy_version, at),
            )

    def placement_origin(self, tenant_id: str, memory_id: str) -> Scope | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT origin FROM graph_placed WHERE tenant_id = %s AND memory_id = %s",
                (tenant_id, memory_id),
            ).fetchone()
        return None if row is None else Scope(row[0])
