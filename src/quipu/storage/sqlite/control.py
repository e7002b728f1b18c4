"""Tenants, credentials and the audit log on SQLite (a mixin of :class:`SQLiteStore`)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from quipu.core.auth import AuditEvent, Credential, Tenant
from quipu.core.records import Role
from quipu.errors import Conflict
from quipu.storage.admission import admit
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros, to_micros_opt

_CRED_COLUMNS = (
    "tenant_id, key_id, kind, role, created_at, name, agent_id, user_id, grants, parent_key_id,"
    " expires_at, revoked_at, last_used_at, secret_hash"
)


class ControlTables:
    """Needs ``_tx()`` (the write transaction) and ``_reader()`` from the store."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def maintain(self) -> dict[str, list[str]]:
        """Nothing to build: the scope index is exact and lives in memory."""
        return {}

    # -- tenants -----------------------------------------------------------------------------
    def create_tenant(self, tenant: Tenant) -> None:
        admit(tenant)
        with self._tx() as c:
            try:
                c.execute(
                    "INSERT INTO tenants (tenant_id, name, created_at) VALUES (?, ?, ?)",
                    (tenant.tenant_id, tenant.name, to_micros(tenant.created_at)),
                )
            except sqlite3.IntegrityError:
                raise Conflict(f"tenant {tenant.tenant_id} exists", code="tenant_exists") from None

    def get_tenant(self, tenant_id: str) -> Tenant | None:
        row = (
            self._reader()
            .execute(
                "SELECT tenant_id, name, created_at FROM tenants WHERE tenant_id = ?", (tenant_id,)
            )
            .fetchone()
        )
        return None if row is None else Tenant(row[0], row[1], from_micros(row[2]))

    def list_tenants(self) -> list[Tenant]:
        rows = self._reader().execute(
            "SELECT tenant_id, name, created_at FROM tenants ORDER BY tenant_id"
        )
        return [Tenant(r[0], r[1], from_micros(r[2])) for r in rows]

    # -- credentials -------------------------------------------------------------------------
    def insert_credential(self, credential: Credential, secret_hash: str) -> None:
        admit(credential)
        c = credential
        with self._tx() as conn:
            conn.execute(
                f"INSERT INTO credentials ({_CRED_COLUMNS}) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    c.tenant_id,
                    c.key_id,
                    c.kind,
                    c.role.value,
                    to_micros(c.created_at),
                    c.name,
                    c.agent_id,
                    c.user_id,
                    json.dumps(sorted(c.grants)),
                    c.parent_key_id,
                    to_micros_opt(c.expires_at),
                    to_micros_opt(c.revoked_at),
                    to_micros_opt(c.last_used_at),
                    secret_hash,
                ),
            )

    def find_credential(self, key_id: str) -> tuple[Credential, str] | None:
        row = (
            self._reader()
            .execute(f"SELECT {_CRED_COLUMNS} FROM credentials WHERE key_id = ?", (key_id,))
            .fetchone()
        )
        return None if row is None else (_credential(row), row[13])

    def list_credentials(self, tenant_id: str) -> list[Credential]:
        rows = self._reader().execute(
            f"SELECT {_CRED_COLUMNS} FROM credentials WHERE tenant_id = ? ORDER BY created_at",
            (tenant_id,),
        )
        return [_credential(r) for r in rows]

    def revoke_credential(self, tenant_id: str, key_id: str, at: datetime) -> bool:
        with self._tx() as c:
            cur = c.execute(
                "UPDATE credentials SET revoked_at = ? WHERE tenant_id = ? AND key_id = ?"
                " AND revoked_at IS NULL",
                (to_micros(at), tenant_id, key_id),
            )
            return cur.rowcount > 0

    def touch_credential(self, key_id: str, at: datetime) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE credentials SET last_used_at = ? WHERE key_id = ?", (to_micros(at), key_id)
            )

    # -- audit -------------------------------------------------------------------------------
    def record_audit(self, event: AuditEvent) -> None:
        admit(event)
        with self._tx() as c:
            insert_audit(c, event)

    def list_audit(self, tenant_id: str, before: int | None, limit: int) -> list[AuditEvent]:
        rows = self._reader().execute(
            "SELECT seq, tenant_id, at, actor_key, role, agent_id, user_id, surface, action,"
            " target_ids, reason, details FROM audit_log WHERE tenant_id = ? AND seq < ?"
            " ORDER BY seq DESC LIMIT ?",
            (tenant_id, 2**62 if before is None else before, limit),
        )
        return [
            AuditEvent(
                seq=r[0],
                tenant_id=r[1],
                at=from_micros(r[2]),
                actor_key=r[3],
                role=r[4],
                agent_id=r[5],
                user_id=r[6],
                surface=r[7],
                action=r[8],
                target_ids=tuple(json.loads(r[9])),
                reason=r[10],
                details=json.loads(r[11]),
            )
            for r in rows
        ]


def insert_audit(c: sqlite3.Connection, e: AuditEvent) -> None:
    c.execute(
        "INSERT INTO audit_log (tenant_id, at, actor_key, role, agent_id, user_id, surface,"
        " action, target_ids, reason, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.tenant_id,
            to_micros(e.at),
            e.actor_key,
            e.role,
            e.agent_id,
            e.user_id,
            e.surface,
            e.action,
            json.dumps(list(e.target_ids)),
            e.reason,
            json.dumps(e.details, sort_keys=True),
        ),
    )


def _credential(r: Any) -> Credential:
    return Credential(
        tenant_id=r[0],
        key_id=r[1],
        kind=r[2],
        role=Role(r[3]),
        created_at=from_micros(r[4]),
        name=r[5],
        agent_id=r[6],
        user_id=r[7],
        grants=frozenset(json.loads(r[8])),
        parent_key_id=r[9],
        expires_at=from_micros_opt(r[10]),
        revoked_at=from_micros_opt(r[11]),
        last_used_at=from_micros_opt(r[12]),
    )
