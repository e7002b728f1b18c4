"""Snapshots (LIFE-8) and the project registry (SCOPE-6)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from quipu.core import validate
from quipu.core.governance import (
    Project,
    Snapshot,
    SnapshotMember,
)
from quipu.core.knowledge import subject_of
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Role,
    Status,
)
from quipu.core.scopes import TENANT_WRITE_GRANT
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.governance.base import (
    MAX_LABEL_CHARS,
    MAX_SNAPSHOT_MEMBERS,
    WITHHELD,
    GovernanceBase,
)
from quipu.guard import not_found


@dataclass(frozen=True)
class Resolved:
    """A snapshot as the caller may read it now: each member, or why it is withheld."""

    snapshot: Snapshot
    members: list[tuple[SnapshotMember, MemoryVersion | None, str | None]]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.snapshot.to_dict(),
            "members": [
                {
                    "id": m.id,
                    "version": m.version,
                    "memory": None if memory is None else memory.to_dict(),
                    "withheld": why,
                }
                for m, memory, why in self.members
            ],
        }


class Pinning(GovernanceBase):
    """Snapshots and projects."""

    # -- snapshots (LIFE-8) ------------------------------------------------------------------
    def snapshot_create(
        self,
        principal: Principal,
        *,
        ids: object = None,
        members: object = None,
        label: object = None,
        recall_id: object = None,
    ) -> Snapshot:
        """Pin exact versions for a run: ``ids`` pins each memory's current version,
        ``members`` (``[{"id", "version"}]``) the versions named, ``recall_id`` the memories a
        merged recall surfaced to this caller, each at the version current when it was
        recalled (an agent citing what it read). Each must be readable by the caller now (404
        otherwise, as for any foreign id); exactly one of the three."""
        if recall_id is not None:
            if ids is not None or members is not None:
                raise InvalidInput(
                    "send ids, members or recall_id",
                    code="invalid_snapshot",
                    details={"field": "recall_id"},
                )
            members = self._recalled(principal, recall_id)
        pinned = self._members(principal, ids, members)
        label_v = None if label is None else label_text(label)
        snapshot = Snapshot(
            principal.tenant_id, uuid.uuid4().hex, label_v, principal.key_id, self._clock(), pinned
        )
        self.guard.admit_write(principal)
        self.store.put_snapshot(snapshot)
        self.guard.audit(
            principal, "snapshot.create", (snapshot.snapshot_id,), details={"members": len(pinned)}
        )
        return snapshot

    def snapshot_resolve(self, principal: Principal, snapshot_id: object) -> Resolved:
        """Each pinned version as the caller may read it now, or ``withheld`` with the reason
        (``not_found``, ``quarantined``, ``unavailable``, ``erased``, ``archived``,
        ``expired``, ``rejected``, ``candidate``): never the stale content of a withheld one."""
        ident = validate.identifier(snapshot_id, field="snapshot_id")
        snapshot = self.store.get_snapshot(principal.tenant_id, ident)
        # owner-scoped like every read: the key that pinned it, or a tenant admin; anyone
        # else gets the missing id's 404 (SCOPE-7), not the list of what was pinned
        mine = snapshot is not None and (
            snapshot.created_by == principal.key_id
            or principal.role in (Role.ADMIN, Role.SUPERADMIN)
        )
        if snapshot is None or not mine:
            raise NotFound(f"no snapshot {ident}", details={"snapshot_id": ident})
        now = self._clock()
        out: list[tuple[SnapshotMember, MemoryVersion | None, str | None]] = []
        for member in snapshot.members:
            try:
                ref = self.guard.authorise(principal, member.id, None)
            except NotFound:
                out.append((member, None, "not_found"))
                continue
            versions = self.store.history(ref, member.id)
            pinned = next((v for v in versions if v.version == member.version), None)
            why = withheld(versions[-1] if versions else None, pinned, now)
            out.append((member, None if why else pinned, why))
        return Resolved(snapshot, out)

    # -- projects (SCOPE-6) ------------------------------------------------------------------
    def project_create(
        self, principal: Principal, project_id: object, *, name: object = None
    ) -> Project:
        """Register a project in the tenant (admins or ``tenant:write``); 409
        ``project_exists`` when the id is taken."""
        if (
            principal.role not in (Role.ADMIN, Role.SUPERADMIN)
            and TENANT_WRITE_GRANT not in principal.grants
        ):
            raise Forbidden(
                "registering a project needs an admin key or tenant:write", code="forbidden"
            )
        ident = validate.identifier(project_id, field="project_id")
        project = Project(
            principal.tenant_id,
            ident,
            None if name is None else label_text(name, "name"),
            principal.key_id,
            self._clock(),
        )
        self.guard.admit_write(principal)
        self.store.put_project(project)
        self.guard.audit(principal, "project.create", (ident,))
        return project

    def projects(self, principal: Principal) -> list[Project]:
        return self.store.list_projects(principal.tenant_id)

    def _recalled(self, principal: Principal, recall_id: object) -> list[dict[str, Any]]:
        """The memories of a merged recall's ledger (RECALL-9) that this caller's subject was
        shown, each at the version that was current at the recall; knowledge rows are not
        memories and are left out. Another subject's recall, or none, is 404."""
        rid = validate.identifier(recall_id, field="recall_id")
        ledger = self.store.recall_get(principal.tenant_id, rid)
        if ledger is None or ledger.subject != subject_of(principal):
            raise NotFound(f"no recall {rid}", code="not_found", details={"recall_id": rid})
        found: list[dict[str, Any]] = []
        for ident in ledger.items:
            ref = self.store.locate(principal.tenant_id, ident)
            if ref is None:
                continue  # a knowledge article, or a memory since erased
            then = [v for v in self.store.history(ref, ident) if v.recorded_at <= ledger.at]
            if then:
                found.append({"id": ident, "version": then[-1].version})
        if not found:
            raise InvalidInput(
                "that recall surfaced no memory to pin",
                code="invalid_snapshot",
                details={"field": "recall_id"},
            )
        return found

    def _members(
        self, principal: Principal, ids: object, members: object
    ) -> tuple[SnapshotMember, ...]:
        wanted: list[tuple[str, int | None]] = []
        if (ids is None) == (members is None):
            raise InvalidInput(
                "send ids or members", code="invalid_snapshot", details={"field": "ids"}
            )
        raw = ids if ids is not None else members
        if not isinstance(raw, list | tuple) or not 1 <= len(raw) <= MAX_SNAPSHOT_MEMBERS:
            raise InvalidInput(
                f"a snapshot pins 1 to {MAX_SNAPSHOT_MEMBERS} memories",
                code="invalid_snapshot",
                details={"field": "ids" if ids is not None else "members"},
            )
        for item in raw:
            if ids is not None:
                wanted.append((validate.identifier(item, field="ids"), None))
                continue
            if not isinstance(item, dict) or set(item) != {"id", "version"}:
                raise InvalidInput(
                    "each member is {id, version}",
                    code="invalid_snapshot",
                    details={"field": "members"},
                )
            number = validate.bounded_int(
                item["version"], field="members.version", low=1, high=2**31
            )
            wanted.append((validate.identifier(item["id"], field="members.id"), number))
        pinned: list[SnapshotMember] = []
        for ident, version in wanted:
            ref = self.guard.authorise(principal, ident, None)
            versions = self.store.history(ref, ident)
            chosen = versions[-1] if version is None and versions else None
            if version is not None:
                chosen = next((v for v in versions if v.version == version), None)
            if chosen is None or withheld(versions[-1], chosen, self._clock()) is not None:
                raise not_found(ident)
            pinned.append(SnapshotMember(ident, chosen.version))
        return tuple(dict.fromkeys(pinned))


def withheld(
    current: MemoryVersion | None, pinned: MemoryVersion | None, now: datetime
) -> str | None:
    """Why a pinned member may not be returned now, or None (LIFE-8: fail closed)."""
    if current is None or pinned is None:
        return "not_found"
    for status in (current.status, pinned.status):
        if status in WITHHELD:
            return WITHHELD[status]
    for version in (current, pinned):
        if (
            version.invalid_at is not None
            and version.invalid_at <= now
            and version.status is Status.ACTIVE
        ):
            return "expired"
    return None


def label_text(value: object, field: str = "label") -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_LABEL_CHARS:
        raise InvalidInput(
            f"{field} must be a non-blank string of at most {MAX_LABEL_CHARS} characters",
            code="invalid_label",
            details={"field": field},
        )
    return validate.clean_string(value, field)
