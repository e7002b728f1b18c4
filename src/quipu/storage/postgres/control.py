"""Tenants, credentials and the audit log on PostgreSQL (a mixin of :class:`PostgresStore`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.auth import AuditEvent, Credential, Tenant
from quipu.core.records import Role
from quipu.errors import Conflict
from quipu.storage.admission import admit
from quipu.storage.postgres.rows import utc, utc_opt

_CRED_COLUMNS = (
    "tenant_id, key_id, kind, role, created_at, name, agent_id, user_id, grants, parent_key_id,"
    " expires_at, revoked_at, last_used_at, secret_hash"
)
_AUDIT_COLUMNS = (
    "seq, tenant_id, at, actor_key, role, agent_id, user_id, surface, action, target_ids,"
    " reason, details"
)


class ControlTables:
    """Needs ``_conn()`` (an autocommit connection) and ``_tx()`` (one transaction)."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    # -- tenants -----------------------------------------------------------------------------
    def create_tenant(self, tenant: Tenant) -> None:
        admit(tenant)
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO tenants (tenant_id, name, created_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id) DO NOTHING RETURNING tenant_id",
                (tenant.tenant_id, tenant.name, tenant.created_at),
            ).fetchone()
            if row is None:
                raise Conflict(f"tenant {tenant.tenant_id} exists", code="tenant_exists")

    def get_tenant(self, tenant_id: str) -> Tenant | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT tenant_id, name, created_at FROM tenants WHERE tenant_id = %s",
                (tenant_id,),
            ).fetchone()
        return None if row is None else Tenant(row[0], row[1], utc(row[2]))

    def list_tenants(self) -> list[Tenant]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT tenant_id, name, created_at FROM tenants ORDER BY tenant_id"
            ).fetchall()
        return [Tenant(r[0], r[1], utc(r[2])) for r in rows]

    # -- credentials -------------------------------------------------------------------------
    def insert_credential(self, credential: Credential, secret_hash: str) -> None:
        admit(credential)
        c = credential
        with self._tx() as conn:
            conn.execute(
                f"INSERT INTO credentials ({_CRED_COLUMNS}) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    c.tenant_id,
                    c.key_id,
                    c.kind,
                    c.role.value,
                    c.created_at,
                    c.name,
                    c.agent_id,
                    c.user_id,
                    sorted(c.grants),
                    c.parent_key_id,
                    c.expires_at,
                    c.revoked_at,
                    c.last_used_at,
                    secret_hash,
                ),
            )

    def find_credential(self, key_id: str) -> tuple[Credential, str] | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_CRED_COLUMNS} FROM credentials WHERE key_id = %s", (key_id,)
            ).fetchone()
        return None if row is None else (_credential(row), str(row[13]))

    def list_credentials(self, tenant_id: str) -> list[Credential]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_CRED_COLUMNS} FROM credentials WHERE tenant_id = %s"
                " ORDER BY created_at, key_id",
                (tenant_id,),
            ).fetchall()
        return [_credential(r) for r in rows]

    def revoke_credential(self, tenant_id: str, key_id: str, at: datetime) -> bool:
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE credentials SET revoked_at = %s WHERE tenant_id = %s AND key_id = %s"
                " AND revoked_at IS NULL",
                (at, tenant_id, key_id),
            )
            return cur.rowcount > 0

    def touch_credential(self, key_id: str, at: datetime) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE credentials SET last_used_at = %s WHERE key_id = %s", (at, key_id))

    # -- audit -------------------------------------------------------------------------------
    def record_audit(self, event: AuditEvent) -> None:
        admit(event)
        with self._tx() as conn:
            insert_audit(conn, event)

    def list_audit(self, tenant_id: str, before: int | None, limit: int) -> list[AuditEvent]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_AUDIT_COLUMNS} FROM audit_log WHERE tenant_id = %s AND seq < %s"
                " ORDER BY seq DESC LIMIT %s",
                (tenant_id, 2**62 if before is None else before, limit),
            ).fetchall()
        return [_audit(r) for r in rows]


def insert_audit(conn: psycopg.Connection[Any], e: AuditEvent) -> None:
    conn.execute(
        "INSERT INTO audit_log (tenant_id, at, actor_key, role, agent_id, user_id, surface,"
        " action, target_ids, reason, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            e.tenant_id,
            e.at,
            e.actor_key,
            e.role,
            e.agent_id,
            e.user_id,
            e.surface,
            e.action,
            list(e.target_ids),
            e.reason,
            json.dumps(e.details, sort_keys=True),
        ),
    )


def _audit(r: Sequence[Any]) -> AuditEvent:
    return AuditEvent(
        seq=int(r[0]),
        tenant_id=r[1],
        at=utc(r[2]),
        actor_key=r[3],
        role=r[4],
        agent_id=r[5],
        user_id=r[6],
        surface=r[7],
        action=r[8],
        target_ids=tuple(r[9]),
        reason=r[10],
        details=r[11],
    )


def _credential(r: Sequence[Any]) -> Credential:
    return Credential(
        tenant_id=r[0],
        key_id=r[1],
        kind=r[2],
        role=Role(r[3]),
        created_at=utc(r[4]),
        name=r[5],
        agent_id=r[6],
        user_id=r[7],
        grants=frozenset(r[8]),
        parent_key_id=r[9],
        expires_at=utc_opt(r[10]),
        revoked_at=utc_opt(r[11]),
        last_used_at=utc_opt(r[12]),
    )
