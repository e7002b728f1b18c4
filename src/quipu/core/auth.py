"""Tenants, credentials and audit events (SCOPE-1, SCOPE-2, SAFE-4). Pure data and rules."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quipu.core.records import MemoryVersion, Principal, Role
from quipu.errors import InvalidInput, Unauthorized

KEY_PREFIX = "qk"
TOKEN_PREFIX = "qt"
_CREDENTIAL = re.compile(r"^(qk|qt)_([0-9a-f]{16})_([A-Za-z0-9_-]{20,100})$")
_TENANT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    name: str
    created_at: datetime


@dataclass(frozen=True)
class Credential:
    """An API key (``kind='key'``) or a run token minted by a service key (``'run_token'``)."""

    tenant_id: str
    key_id: str
    kind: str
    role: Role
    created_at: datetime
    name: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    grants: frozenset[str] = frozenset()
    parent_key_id: str | None = None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "key_id": self.key_id,
            "kind": self.kind,
            "role": self.role.value,
            "name": self.name,
            "agent_id": self.agent_id,
            "user_id": self.user_id,
            "grants": sorted(self.grants),
            "parent_key_id": self.parent_key_id,
            "created_at": self.created_at.isoformat(),
            "expires_at": _iso(self.expires_at),
            "revoked_at": _iso(self.revoked_at),
            "last_used_at": _iso(self.last_used_at),
        }


@dataclass(frozen=True)
class Actor:
    """Who makes a write, as its audit line names them (SAFE-4): the acting key, its role, the
    agent and end user it acts as, and the surface the request came through.

    The stores take one with every write and put it on the version's audit line in the same
    transaction. It is not part of the version: a version keeps only the key (``actor``), and
    its provenance stays the creator's when another key revises it."""

    key_id: str
    role: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    surface: str = "library"

    @classmethod
    def of(cls, principal: Principal) -> Actor:
        return cls(
            key_id=principal.key_id,
            role=principal.role.value,
            agent_id=principal.agent_id,
            user_id=principal.user_id,
            surface=principal.surface,
        )


@dataclass(frozen=True)
class AuditEvent:
    """One audited act: who (key and principal), through which surface, what, on which ids, why."""

    tenant_id: str
    at: datetime
    actor_key: str
    surface: str
    action: str
    target_ids: tuple[str, ...] = ()
    role: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    seq: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "tenant_id": self.tenant_id,
            "at": self.at.isoformat(),
            "actor_key": self.actor_key,
            "role": self.role,
            "agent_id": self.agent_id,
            "user_id": self.user_id,
            "surface": self.surface,
            "action": self.action,
            "target_ids": list(self.target_ids),
            "reason": self.reason,
            "details": self.details,
        }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def new_secret(prefix: str) -> tuple[str, str, str]:
    """(key_id, full secret shown once, sha256 of the secret part)."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return key_id, f"{prefix}_{key_id}_{secret}", hash_secret(secret)


def hash_secret(secret: str) -> str:
    """Secrets are 256 random bits, so a plain SHA-256 is a safe, fast verifier."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_credential(value: str) -> tuple[str, str, str]:
    """(prefix, key_id, secret) of a presented credential; 401 when it has not our shape."""
    match = _CREDENTIAL.match(value.strip())
    if match is None:
        raise Unauthorized("the credential is malformed", code="unauthorized")
    return match.group(1), match.group(2), match.group(3)


def check_tenant_id(value: str) -> str:
    if not _TENANT.match(value):
        raise InvalidInput(
            "tenant ids are 1-63 lower-case letters, digits, '-' or '_'",
            code="invalid_tenant_id",
        )
    return value


def version_audit(memory: MemoryVersion, by: Actor) -> AuditEvent:
    """The audit line of a memory write, written in the version's own transaction: what changed
    from the version, who changed it from ``by`` (key, role, agent, user, surface)."""
    details: dict[str, object] = {"version": memory.version, "status": memory.status.value}
    if memory.related_id:
        details["related_id"] = memory.related_id
    return AuditEvent(
        tenant_id=memory.tenant_id,
        at=memory.recorded_at,
        actor_key=by.key_id,
        surface=by.surface,
        action=f"memory.{memory.relation.value}",
        target_ids=(memory.id,),
        role=by.role,
        agent_id=by.agent_id,
        user_id=by.user_id,
        reason=memory.reason,
        details=details,
    )
