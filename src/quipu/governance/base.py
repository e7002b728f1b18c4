"""What the governance use cases share: the service's parts (store, guard, memory service,
queue, clock), who may do what, reasons, and the limits of their inputs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from quipu.core import validate
from quipu.core.auth import Actor
from quipu.core.governance import (
    ERASE_GRANT,
    Erasure,
)
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Role,
    ScopeRef,
    Status,
)
from quipu.core.scopes import is_reviewer
from quipu.core.text import embedding_key
from quipu.errors import Forbidden, InvalidInput, PreconditionRequired
from quipu.governance.derived import DerivedEraser, derived_erasers
from quipu.guard import not_found, reason
from quipu.jobs.queue import JobQueue
from quipu.memories import MemoryService

#: The job kind of a subject erasure.
ERASE_SUBJECT = "erase_subject"
#: Families erased per transaction, and session turns deleted per transaction.
FAMILY_BATCH = 500
TURN_BATCH = 5000
#: Keys and documents erased per batch of a subject erasure (each its own transaction).
PLANE_BATCH = 200
#: A subject erasure's stages, in order (its progress names them).
SUBJECT_STAGES = ("memories", "kv", "documents", "sessions")
MAX_SNAPSHOT_MEMBERS = 200
MAX_MERGE = 20
MAX_LABEL_CHARS = 200
#: Why a snapshot member is withheld, by the family's status now (LIFE-8: fail closed).
WITHHELD = {
    Status.QUARANTINED: "quarantined",
    Status.UNAVAILABLE: "unavailable",
    Status.ERASED: "erased",
    Status.ARCHIVED: "archived",
    Status.EXPIRED: "expired",
    Status.REJECTED: "rejected",
    Status.CANDIDATE: "candidate",
}

Progress = Callable[[str, int], None]
"""``progress(stage, done)``: a subject erasure's stage (:data:`SUBJECT_STAGES`) and count."""


class GovernanceBase:
    """The state every part of :class:`~quipu.governance.GovernanceService` works on."""

    def __init__(
        self,
        memory: MemoryService,
        queue: JobQueue | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``queue``: the job queue, for job cancel and retry."""
        self.memory = memory
        self.store = memory.store
        self.guard = memory.guard
        self.queue = queue
        self._clock = clock or (lambda: datetime.now(UTC))
        #: What every erase path calls first: one eraser per plane deriving data from memories
        #: (:data:`quipu.governance.derived.DERIVED_ERASERS`).
        self.derived_erasers: list[DerivedEraser] = derived_erasers(self.store)

    def version_named(
        self, principal: Principal, memory_id: object, expected: int | None, *, tenant_wide: bool
    ) -> None:
        """LIFE-2 over HTTP and MCP: a change names the version it replaces. Without one, 428
        ``expected_version_required``, after the checks a call would make first: a reviewer
        for tenant-wide acts (403), then a missing or foreign id (404, SCOPE-7)."""
        if expected is not None:
            return
        if tenant_wide:
            need_reviewer(principal)
            self._locate(principal, validate.identifier(memory_id, field="id"))
        else:
            self.guard.authorise(principal, memory_id, None, write=True)
        raise PreconditionRequired(
            "name the version you replace: expected_version (the version you read)",
            details={"field": "expected_version"},
        )

    # -- helpers -----------------------------------------------------------------------------
    def _locate(self, principal: Principal, ident: str) -> ScopeRef:
        """The partition of a memory anywhere in the principal's tenant (tenant-wide acts)."""
        ref = self.store.locate(principal.tenant_id, ident)
        if ref is None:
            raise not_found(ident)
        return ref

    def _current(self, ref: ScopeRef, ident: str) -> MemoryVersion:
        current = self.store.get(ref, ident)
        if current is None:
            raise not_found(ident)
        return current

    def _erasure(self, principal: Principal, why: str) -> Erasure:
        return Erasure(Actor.of(principal), why, self._clock())

    def _vector(self, ref: ScopeRef, text: str, current: str) -> tuple[Any, str | None]:
        """The vector a version with ``text`` is stored with (none when the text is
        unchanged: the store keeps the current one) and its embedding key."""
        if text == current:
            return None, None
        vector = self.memory.embed_for_write(ref.tenant_id, text)
        return vector, None if vector is None else embedding_key(text)


def reason_text(value: object) -> str | None:
    """An optional reason (the guard's rules)."""
    return reason(value)


def required_reason(value: object) -> str:
    why = reason(value)
    if not why or not why.strip():
        raise InvalidInput(
            "this act needs a reason", code="reason_required", details={"field": "reason"}
        )
    return why


def need_admin(principal: Principal) -> None:
    if principal.role not in (Role.ADMIN, Role.SUPERADMIN):
        raise Forbidden("this is for admins", code="forbidden")


def need_superadmin(principal: Principal) -> None:
    if principal.role is not Role.SUPERADMIN:
        raise Forbidden("oversight is for superadmins", code="forbidden")


def need_reviewer(principal: Principal) -> None:
    if not is_reviewer(principal):
        raise Forbidden(
            "reviewing needs an admin key or the memory:review grant", code="review_required"
        )


def need_eraser(principal: Principal) -> None:
    if principal.role not in (Role.ADMIN, Role.SUPERADMIN) and ERASE_GRANT not in principal.grants:
        raise Forbidden("erasing needs an admin key or the memory:erase grant", code="forbidden")
