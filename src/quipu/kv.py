"""The key/value plane's use cases (KV-1): set, get, list by prefix, history, delete and erase.

An exact read path for values an agent must not paraphrase: nothing here is embedded or
recalled semantically. Each call reads or writes exactly one scope partition, resolved from the
principal like every memory call (SCOPE-1); a key of another scope, agent or tenant reads as
absent (404 ``not_found``, SCOPE-7). Values are JSON bounded like metadata (depth 8, 256 keys,
integers within ±2**53, :attr:`Limits.max_metadata_bytes` serialised) and screened for secrets
(SAFE-1) by the shared :class:`~quipu.guard.Guard`, which also rate-limits writes and audits
erasures; each write's own audit line is written by the store in the write's transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from quipu.core import kv, validate
from quipu.core.auth import AuditEvent
from quipu.core.governance import ERASE_GRANT, subject_of
from quipu.core.kv import EntryStatus, KVChange, KVEntry
from quipu.core.records import Principal, Role, ScopeRef
from quipu.core.scopes import check_write, resolve_scope
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.governance.holds import Reach, erase_path, under_holds
from quipu.guard import Guard, reason
from quipu.memories import MemoryService


@dataclass(frozen=True)
class KVPage:
    """One page of a prefix listing; ``next_cursor`` is the last key (None: no more)."""

    items: list[KVEntry]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"items": [e.to_dict() for e in self.items], "next_cursor": self.next_cursor}


class KeyValueService:
    """The key/value use cases over the memory service's store and guard."""

    def __init__(self, memory: MemoryService, clock: Callable[[], datetime] | None = None) -> None:
        self.store = memory.store
        self.guard: Guard = memory.guard
        self.limits = memory.limits
        self._clock = clock or (lambda: datetime.now(UTC))

    # -- writes ------------------------------------------------------------------------------
    def set(
        self,
        principal: Principal,
        key: object,
        value: object,
        *,
        scope: str = "agent",
        expected_version: object = None,
        reason: object = None,
    ) -> KVEntry:
        """Write ``value`` as the next version of ``key``. ``expected_version``: None writes
        unconditionally, 0 only if the key holds no value, n only if its current version is n
        (409 ``version_conflict`` otherwise: read, then write again)."""
        ref, name = self._target(principal, key, scope, write=True)
        stored = kv.value(value, max_bytes=self.limits.max_metadata_bytes)
        change = self._change(principal, name, stored, EntryStatus.SET, reason)
        self.guard.screen(change)
        self.guard.admit_write(principal)
        return self.store.kv_write(
            ref, change, _expected(expected_version), self._clock(), self.limits.quota_per_owner
        )

    def delete(
        self,
        principal: Principal,
        key: object,
        *,
        scope: str = "agent",
        expected_version: object = None,
        reason: object = None,
    ) -> KVEntry:
        """Delete ``key`` (logically: a version that reads as absent; history keeps the values
        before it). 404 when it holds no value."""
        ref, name = self._target(principal, key, scope, write=True)
        change = self._change(principal, name, None, EntryStatus.DELETED, reason)
        self.guard.screen(change)
        self.guard.admit_write(principal)
        return self.store.kv_write(
            ref, change, _expected(expected_version), self._clock(), self.limits.quota_per_owner
        )

    @erase_path("kv")
    def erase(
        self, principal: Principal, key: object, *, scope: str = "agent", reason: object
    ) -> dict[str, Any]:
        """Compliance erase of one key (LIFE-4): every version's value and reason wiped, the
        key takes no more writes; audited as ``kv.erase`` with the reason. Needs an admin key
        or the ``memory:erase`` grant (403 ``forbidden``) and a reason (422
        ``reason_required``); 409 ``legal_hold`` under a hold on the tenant or the scope's
        subject."""
        if principal.role not in (Role.ADMIN, Role.SUPERADMIN) and (
            ERASE_GRANT not in principal.grants
        ):
            raise Forbidden("erasing needs an admin key or the memory:erase grant")
        why = _required_reason(reason)
        ref, name = self._target(principal, key, scope, write=True)
        audit = AuditEvent(
            tenant_id=principal.tenant_id,
            at=self._clock(),
            actor_key=principal.key_id,
            surface=principal.surface,
            action="kv.erase",
            target_ids=(name,),
            role=principal.role.value,
            agent_id=principal.agent_id,
            user_id=principal.user_id,
            reason=why,
            details={"scope": ref.scope.value},
        )
        with under_holds(self.store, Reach.of(ref.tenant_id, (), [subject_of(ref)])):
            wiped = self.store.kv_erase(ref, name, audit)
            if not wiped:
                raise _missing(name)
        return {"key": name, "scope": ref.scope.value, "versions_erased": wiped}

    # -- reads -------------------------------------------------------------------------------
    def get(
        self, principal: Principal, key: object, *, scope: str = "agent", as_of: object = None
    ) -> KVEntry:
        """The value of ``key`` now, or at ``as_of``: exactly as it was set. 404 when the key
        holds no value (never set, deleted, erased, or in another scope)."""
        ref, name = self._target(principal, key, scope)
        found = self.store.kv_get(ref, name, validate.instant(as_of, field="as_of"))
        if found is None or found.status is not EntryStatus.SET:
            raise _missing(name)
        return found

    def history(self, principal: Principal, key: object, *, scope: str = "agent") -> list[KVEntry]:
        """Every version of ``key``, oldest first (deletes included; erased values are null)."""
        ref, name = self._target(principal, key, scope)
        found = self.store.kv_history(ref, name)
        if not found:
            raise _missing(name)
        return found

    def list(
        self,
        principal: Principal,
        *,
        prefix: object = None,
        scope: str = "agent",
        cursor: object = None,
        limit: int | None = None,
        as_of: object = None,
    ) -> KVPage:
        """Keys starting with ``prefix`` that hold a value, in byte order, a page at a time:
        pass the answer's ``next_cursor`` back as ``cursor`` for the next page."""
        ref = resolve_scope(principal, scope)
        start = kv.prefix(prefix)
        after = None if cursor is None else kv.key(cursor, field="cursor")
        size = self.guard.page_size(limit)
        items = self.store.kv_list(
            ref, start, after, size + 1, validate.instant(as_of, field="as_of")
        )
        more = len(items) > size
        items = items[:size]
        return KVPage(items, items[-1].key if more and items else None)

    # -- helpers -----------------------------------------------------------------------------
    def _target(
        self, principal: Principal, key: object, scope: str, *, write: bool = False
    ) -> tuple[ScopeRef, str]:
        name = kv.key(key)
        ref = resolve_scope(principal, scope)
        if write:
            check_write(principal, ref)
        return ref, name

    def _change(
        self,
        principal: Principal,
        key: str,
        value: Any,
        status: EntryStatus,
        why: object,
    ) -> KVChange:
        return KVChange(
            key=key,
            value=value,
            status=status,
            actor=principal.key_id,
            surface=principal.surface,
            agent_id=principal.agent_id,
            reason=reason(why),
        )


def _expected(value: object) -> int | None:
    if value is None:
        return None
    return validate.bounded_int(value, field="expected_version", low=0, high=2**31 - 1)


def _required_reason(value: object) -> str:
    why = reason(value)
    if not why or not why.strip():
        raise InvalidInput("erasing needs a reason", code="reason_required")
    return why


def _missing(key: str) -> NotFound:
    """The one 404 for a key that is absent and a key of another scope or tenant (SCOPE-7)."""
    return NotFound(f"no key {key}", details={"key": key})


class KeyValues:
    """The key/value plane with the caller filled in: ``Quipu.kv`` of the embedded client.

    ``mem.kv.set("app/theme", {"mode": "dark"})``, ``mem.kv.get("app/theme").value``."""

    def __init__(self, service: KeyValueService, principal: Principal) -> None:
        self.service = service
        self.principal = principal

    def set(
        self,
        key: str,
        value: Any,
        *,
        scope: str = "agent",
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> KVEntry:
        return self.service.set(
            self.principal,
            key,
            value,
            scope=scope,
            expected_version=expected_version,
            reason=reason,
        )

    def get(self, key: str, *, scope: str = "agent", as_of: object = None) -> KVEntry:
        return self.service.get(self.principal, key, scope=scope, as_of=as_of)

    def delete(
        self,
        key: str,
        *,
        scope: str = "agent",
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> KVEntry:
        return self.service.delete(
            self.principal, key, scope=scope, expected_version=expected_version, reason=reason
        )

    def history(self, key: str, *, scope: str = "agent") -> list[KVEntry]:
        return self.service.history(self.principal, key, scope=scope)

    def erase(self, key: str, *, scope: str = "agent", reason: str) -> dict[str, Any]:
        return self.service.erase(self.principal, key, scope=scope, reason=reason)

    def list(
        self,
        *,
        prefix: str = "",
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        as_of: object = None,
    ) -> KVPage:
        return self.service.list(
            self.principal, prefix=prefix, scope=scope, cursor=cursor, limit=limit, as_of=as_of
        )
