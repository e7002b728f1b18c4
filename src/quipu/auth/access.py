"""Tenants, API keys and run tokens, and turning a presented credential into a Principal.

Keys are random secrets shown once and stored only as a SHA-256 (SCOPE-1); a ``service`` key
mints short-lived run tokens bound to an ``(agent_id, user_id)`` pair (SCOPE-2). Revocation
and expiry are checked on every request, for a run token on its parent key too. Every change
here is audited (SAFE-4).
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from quipu.core import validate
from quipu.core.auth import (
    KEY_PREFIX,
    TOKEN_PREFIX,
    Actor,
    AuditEvent,
    Credential,
    Tenant,
    check_tenant_id,
    hash_secret,
    new_secret,
    parse_credential,
)
from quipu.core.governance import ERASE_GRANT
from quipu.core.placement import GRAPH_TENANT_GRANT
from quipu.core.records import Principal, Role
from quipu.core.scopes import REVIEW_GRANT, TENANT_WRITE_GRANT
from quipu.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from quipu.storage.base import Store

GRANTS = frozenset({TENANT_WRITE_GRANT, REVIEW_GRANT, ERASE_GRANT, GRAPH_TENANT_GRANT})
#: Write ``last_used_at`` at most this often per key, so reads stay read-only in the common case.
TOUCH_INTERVAL = timedelta(seconds=60)


class Access:
    def __init__(
        self,
        store: Store,
        *,
        max_token_ttl: timedelta = timedelta(hours=24),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.max_token_ttl = max_token_ttl
        self._clock = clock or (lambda: datetime.now(UTC))
        self._touched: dict[str, datetime] = {}
        self._lock = threading.Lock()

    # -- administration (CLI, operators) -----------------------------------------------------
    def create_tenant(
        self, tenant_id: str, name: str | None = None, *, actor: str = "cli"
    ) -> Tenant:
        tenant = Tenant(check_tenant_id(tenant_id), name or tenant_id, self._clock())
        self.store.create_tenant(tenant)
        self._audit(tenant.tenant_id, actor, "cli", "tenant.create", (tenant.tenant_id,))
        return tenant

    def list_tenants(self) -> list[Tenant]:
        return self.store.list_tenants()

    def create_key(
        self,
        tenant_id: str,
        role: str | Role,
        *,
        name: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        grants: frozenset[str] | set[str] = frozenset(),
        expires_at: datetime | None = None,
        actor: str = "cli",
    ) -> tuple[Credential, str]:
        """A new API key; the secret is returned once and never stored."""
        self._require_tenant(tenant_id)
        role_v = validate.enum(Role, role, field="role")
        unknown = set(grants) - GRANTS
        if unknown:
            raise InvalidInput(
                f"unknown grant(s): {', '.join(sorted(unknown))}", code="invalid_grant"
            )
        key_id, secret, digest = new_secret(KEY_PREFIX)
        credential = Credential(
            tenant_id=tenant_id,
            key_id=key_id,
            kind="key",
            role=role_v,
            created_at=self._clock(),
            name=name,
            agent_id=None if agent_id is None else validate.agent_id(agent_id),
            user_id=validate.optional_id(user_id, field="user_id"),
            grants=frozenset(grants),
            expires_at=expires_at,
        )
        self.store.insert_credential(credential, digest)
        self._audit(
            tenant_id,
            actor,
            "cli",
            "key.create",
            (key_id,),
            details={"role": role_v.value, "agent_id": agent_id, "user_id": user_id},
        )
        return credential, secret

    def list_keys(self, tenant_id: str) -> list[Credential]:
        self._require_tenant(tenant_id)
        return self.store.list_credentials(tenant_id)

    def revoke_key(
        self, tenant_id: str, key_id: str, *, actor: str = "cli", surface: str = "cli"
    ) -> None:
        if not self.store.revoke_credential(tenant_id, key_id, self._clock()):
            raise NotFound(
                f"no live key {key_id} in tenant {tenant_id}", details={"key_id": key_id}
            )
        self._audit(tenant_id, actor, surface, "key.revoke", (key_id,))

    def mint_run_token(
        self,
        principal: Principal,
        agent_id: object,
        user_id: object = None,
        ttl: timedelta = timedelta(hours=1),
    ) -> tuple[Credential, str]:
        """A short-lived credential acting as ``agent_id`` (for ``user_id``), minted by a
        service key for an agent run it drives."""
        if principal.role is not Role.SERVICE:
            raise Forbidden("only service keys mint run tokens", code="forbidden")
        if ttl <= timedelta(0) or ttl > self.max_token_ttl:
            raise InvalidInput(
                f"ttl must be between 1 s and {int(self.max_token_ttl.total_seconds())} s",
                code="invalid_ttl",
            )
        now = self._clock()
        key_id, secret, digest = new_secret(TOKEN_PREFIX)
        credential = Credential(
            tenant_id=principal.tenant_id,
            key_id=key_id,
            kind="run_token",
            role=Role.AGENT,
            created_at=now,
            agent_id=validate.agent_id(agent_id),
            user_id=validate.optional_id(user_id, field="user_id"),
            parent_key_id=principal.key_id,
            expires_at=now + ttl,
        )
        self.store.insert_credential(credential, digest)
        self._audit(
            principal.tenant_id,
            principal.key_id,
            principal.surface,
            "token.mint",
            (key_id,),
            by=Actor.of(principal),
            details={
                "agent_id": credential.agent_id,
                "user_id": credential.user_id,
                "expires_at": credential.expires_at.isoformat() if credential.expires_at else None,
            },
        )
        return credential, secret

    # -- per request -------------------------------------------------------------------------
    def authenticate(
        self, bearer: str, *, impersonate: str | None = None, surface: str = "http"
    ) -> Principal:
        """The principal of a presented credential (401 when missing, wrong, expired or
        revoked). A superadmin must name the tenant it acts on (SCOPE-8)."""
        prefix, key_id, secret = parse_credential(bearer)
        found = self.store.find_credential(key_id)
        if found is None:
            raise Unauthorized("unknown credential")
        credential, digest = found
        if not hmac.compare_digest(digest, hash_secret(secret)):
            raise Unauthorized("unknown credential")
        if (prefix == TOKEN_PREFIX) != (credential.kind == "run_token"):
            raise Unauthorized("unknown credential")
        now = self._clock()
        self._check_live(credential, now)
        if credential.parent_key_id is not None:
            parent = self.store.find_credential(credential.parent_key_id)
            if parent is None:
                raise Unauthorized("the key that minted this token is gone")
            self._check_live(parent[0], now)
        self._touch(credential.key_id, now)
        return self._principal(credential, impersonate, surface)

    def resume(
        self, key_id: str, *, impersonate: str | None = None, surface: str = "console"
    ) -> tuple[Principal, str]:
        """The principal of a live key named by its id, with the key's stored digest, for a
        session a surface issued after :meth:`authenticate` saw the secret and signed with
        that digest (the console's cookie): 401 when the key is gone, revoked or expired.
        Run tokens are never resumed."""
        found = self.store.find_credential(key_id)
        if found is None or found[0].kind != "key":
            raise Unauthorized("unknown credential")
        credential, digest = found
        now = self._clock()
        self._check_live(credential, now)
        self._touch(credential.key_id, now)
        return self._principal(credential, impersonate, surface), digest

    def _principal(
        self, credential: Credential, impersonate: str | None, surface: str
    ) -> Principal:
        tenant_id = credential.tenant_id
        if credential.role is Role.SUPERADMIN:
            if not impersonate:
                raise InvalidInput(
                    "a superadmin names the tenant it acts on in the X-Quipu-Tenant header",
                    code="impersonation_tenant_required",
                )
            self._require_tenant(impersonate)
            tenant_id = impersonate
        return Principal(
            tenant_id=tenant_id,
            key_id=credential.key_id,
            role=credential.role,
            agent_id=credential.agent_id,
            user_id=credential.user_id,
            grants=credential.grants,
            surface=surface,
            parent_key_id=credential.parent_key_id,
        )

    # -- helpers -----------------------------------------------------------------------------
    def _check_live(self, credential: Credential, now: datetime) -> None:
        if credential.revoked_at is not None:
            raise Unauthorized("this credential was revoked", code="unauthorized")
        if credential.expires_at is not None and credential.expires_at <= now:
            raise Unauthorized("this credential has expired", code="unauthorized")

    def _touch(self, key_id: str, now: datetime) -> None:
        with self._lock:
            last = self._touched.get(key_id)
            if last is not None and now - last < TOUCH_INTERVAL:
                return
            self._touched[key_id] = now
        self.store.touch_credential(key_id, now)

    def _require_tenant(self, tenant_id: str) -> None:
        if self.store.get_tenant(tenant_id) is None:
            raise NotFound(f"no tenant {tenant_id}", code="tenant_not_found")

    def _audit(
        self,
        tenant_id: str,
        actor: str,
        surface: str,
        action: str,
        targets: tuple[str, ...],
        *,
        by: Actor | None = None,
        details: dict[str, object] | None = None,
    ) -> None:
        """An operator act (no principal: ``actor`` names the operator) or, with ``by``, a
        key's act, audited with its role, agent and user (SAFE-4)."""
        self.store.record_audit(
            AuditEvent(
                tenant_id=tenant_id,
                at=self._clock(),
                actor_key=actor,
                surface=surface,
                action=action,
                target_ids=targets,
                role=by.role if by else None,
                agent_id=by.agent_id if by else None,
                user_id=by.user_id if by else None,
                details=dict(details or {}),
            )
        )
