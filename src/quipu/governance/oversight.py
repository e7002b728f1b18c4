"""Operator oversight, the audit log and audited job control (SCOPE-8, SAFE-4)."""

from __future__ import annotations

import base64
import json
from typing import Any

from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.governance import (
    SubjectInfo,
)
from quipu.core.jobs import Job
from quipu.core.query import Cursor, Page
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Relation,
    Scope,
    ScopeRef,
    Status,
)
from quipu.core.scopes import parse_scope, resolve_scope
from quipu.core.versions import Change
from quipu.errors import InvalidInput, NotFound
from quipu.governance.base import (
    GovernanceBase,
    need_admin,
    need_superadmin,
    reason_text,
)


class Overseeing(GovernanceBase):
    """Oversight, the audit log, job cancel and retry."""

    # -- operator oversight, the audit log, jobs (SCOPE-8, SAFE-4) ---------------------------
    def subjects(
        self, principal: Principal, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[SubjectInfo], str | None]:
        """Every scope owner of the tenant with its live count (superadmins); audited."""
        need_superadmin(principal)
        size = self.guard.page_size(limit)
        after = None if cursor is None else _decode_pair(cursor)
        found = self.store.list_subjects(principal.tenant_id, after, size + 1)
        page = found[:size]
        next_cursor = (
            _encode_pair(page[-1].scope.value, page[-1].owner) if len(found) > size else None
        )
        self.guard.audit(principal, "oversight.subjects", (), details={"count": len(page)})
        return page, next_cursor

    def oversight_list(
        self,
        principal: Principal,
        *,
        scope: str | None = None,
        owner: object = None,
        cursor: str | None = None,
        limit: int | None = None,
        **filters: Any,
    ) -> Page:
        """A superadmin lists one subject's memories (``scope`` and ``owner``), or without
        them every subject's current memories of the tenant (``statuses`` filter only)."""
        need_superadmin(principal)
        size = self.guard.page_size(limit)
        at = None if cursor is None else Cursor.decode(cursor)
        if scope is None and owner is None:
            extra = sorted(k for k, v in filters.items() if v is not None and k != "statuses")
            if extra:
                raise InvalidInput(
                    "listing every subject filters by status only; name a scope and owner for more",
                    code="invalid_filter",
                    details={"fields": extra},
                )
            statuses = self.guard.filters(statuses=filters.get("statuses")).statuses
            page = self.store.list_current(principal.tenant_id, statuses, at, size)
            where: dict[str, Any] = {"all_subjects": True}
        else:
            ref = self._oversight_ref(principal, scope or "agent", owner)
            page = self.store.list_page(ref, self.guard.filters(**filters), at, size)
            where = {"scope": ref.scope.value, "owner": ref.owner}
        self.guard.audit(
            principal, "oversight.list", tuple(m.id for m in page.items), details=where
        )
        return page

    def oversight_forget(
        self, principal: Principal, memory_id: object, *, reason: object = None
    ) -> MemoryVersion:
        """A superadmin forgets any memory of the tenant it names; audited."""
        need_superadmin(principal)
        ident = validate.identifier(memory_id, field="id")
        ref = self._locate(principal, ident)
        why = reason_text(reason)
        change = Change(
            actor=principal.key_id, relation=Relation.FORGETS, reason=why, status=Status.UNAVAILABLE
        )
        memory = self.store.append(
            ref, ident, change, None, None, None, self._clock(), self.memory.limits.quota_per_owner
        )
        self.guard.audit(principal, "oversight.forget", (ident,), reason=why)
        return memory

    def audit(
        self, principal: Principal, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        """The tenant's audit log, newest first, for admins (SAFE-4)."""
        need_admin(principal)
        size = self.guard.page_size(limit)
        before = None
        if cursor is not None:
            # ASCII digits that fit a 64-bit sequence number (issue 20 defect 9).
            if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18:
                raise InvalidInput(
                    "the cursor is not one this server issued", code="invalid_cursor"
                )
            before = int(cursor)
        events = self.store.list_audit(principal.tenant_id, before, size + 1)
        next_cursor = str(events[size - 1].seq) if len(events) > size else None
        return events[:size], next_cursor

    def job_cancel(self, principal: Principal, job_id: object) -> Job:
        """Cancel a queued or running job of the tenant (admins); audited."""
        return self._job_act(principal, job_id, "cancel")

    def job_retry(self, principal: Principal, job_id: object) -> Job:
        """Queue a failed or cancelled job of the tenant again (admins); audited."""
        return self._job_act(principal, job_id, "retry")

    def _job_act(self, principal: Principal, job_id: object, act: str) -> Job:
        need_admin(principal)
        ident = validate.identifier(job_id, field="job_id")
        found = self.store.get_job(ident)
        if found is None or found.tenant_id != principal.tenant_id or self.queue is None:
            raise NotFound(f"no job {ident}", details={"job_id": ident})
        job = self.queue.cancel(ident) if act == "cancel" else self.queue.retry(ident)
        self.guard.audit(
            principal,
            f"job.{act}",
            (ident,),
            details={"kind": job.kind, "status": job.status.value},
        )
        return job

    def _oversight_ref(self, principal: Principal, scope: str, owner: object) -> ScopeRef:
        kind = parse_scope(scope)
        if kind is Scope.GLOBAL:
            return resolve_scope(principal, kind)
        return ScopeRef(principal.tenant_id, kind, _owner(owner))


def _owner(value: object) -> str:
    """A scope owner as oversight names it: an id, or ``agent\\x1fuser`` for agent_user."""
    if not isinstance(value, str):
        raise InvalidInput("owner must be a string", code="invalid_id", details={"field": "owner"})
    parts = value.split("\x1f")
    if len(parts) > 2:
        raise InvalidInput(
            "owner holds at most one separator", code="invalid_id", details={"field": "owner"}
        )
    for part in parts:
        validate.identifier(part, field="owner")
    return value


def _encode_pair(a: str, b: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([a, b]).encode()).decode().rstrip("=")


def _decode_pair(token: str) -> tuple[str, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, str) for x in raw)):
            raise ValueError
    except (ValueError, TypeError):
        raise InvalidInput(
            "the cursor is not one this server issued", code="invalid_cursor"
        ) from None
    return str(raw[0]), str(raw[1])
