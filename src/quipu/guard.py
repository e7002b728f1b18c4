"""What every plane's use cases share: who may touch a row, which filters a read applies, the
write admission (rate limit), the secret screen on written fields and the audit trail.

One :class:`Guard` per store, built by the composition root and handed to each plane's use
cases (:mod:`quipu.memories` today; knowledge, graph, documents and governance beside it), so
authorisation, screening and audit live in one place instead of once per plane.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from quipu.auth.ratelimit import RateLimiter, SharedRateLimiter
from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.lifecycle import check_transition, is_review
from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Principal,
    Relation,
    ScopeRef,
    Source,
    Status,
)
from quipu.core.scopes import check_write, is_reviewer, resolve_scope
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.storage.admission import admit, free_text, injected
from quipu.storage.base import Store

#: Relations of versions that set a family's content (who wrote it, for self-review).
_CONTENT = frozenset(
    {Relation.CREATED, Relation.REVISES, Relation.RESTORES, Relation.MERGES, Relation.IMPORTED}
)


class Guard:
    """Authorisation, filters, admission, screening and audit for the use cases of one store.

    ``limiter`` may be set after construction (`quipu serve --auth` adds the shared per-key
    rate limit once the store exists)."""

    def __init__(
        self,
        store: Store,
        limits: Limits,
        clock: Callable[[], datetime],
        limiter: RateLimiter | SharedRateLimiter | None = None,
    ) -> None:
        self.store = store
        self.limits = limits
        self.limiter = limiter
        self._clock = clock

    def authorise(
        self, principal: Principal, memory_id: object, scope: str | None, *, write: bool = False
    ) -> ScopeRef:
        """The partition of ``memory_id`` if the principal owns it; else 404 (SCOPE-7)."""
        ident = validate.identifier(memory_id, field="id")
        found = self.store.locate(principal.tenant_id, ident)
        if found is None:
            raise not_found(ident)
        if scope is not None and found.scope.value != scope:
            raise not_found(ident)
        try:
            mine = resolve_scope(principal, found.scope)
        except InvalidInput:
            raise not_found(ident) from None
        if mine != found:
            raise not_found(ident)
        if write:
            check_write(principal, found)
        return found

    def admit_write(self, principal: Principal) -> None:
        """Take a write token from the principal's rate bucket (MEM-5); 429 when empty."""
        if self.limiter is not None:
            self.limiter.take(principal.rate_key)

    def filters(
        self,
        *,
        as_of: object = None,
        observed_after: object = None,
        observed_before: object = None,
        kinds: object = None,
        tags: object = None,
        sources: object = None,
        min_confidence: object = None,
        project: object = None,
        statuses: object = None,
    ) -> Filters:
        """The validated filters of a read (RECALL-1); forgotten and quarantined rows are never
        readable through them (LIFE-3, LIFE-6)."""
        chosen = validate.enums(Status, statuses, field="status") or frozenset({Status.ACTIVE})
        if chosen & {Status.UNAVAILABLE, Status.QUARANTINED, Status.ERASED}:
            raise InvalidInput(
                "forgotten, quarantined and erased memories are not readable here",
                code="invalid_status",
            )
        return Filters(
            statuses=chosen,
            as_of=validate.instant(as_of, field="as_of"),
            observed_after=validate.instant(observed_after, field="observed_after"),
            observed_before=validate.instant(observed_before, field="observed_before"),
            kinds=validate.enums(Kind, kinds, field="kind"),
            tags=frozenset(validate.labels(tags, field="tags", max_count=self.limits.max_tags)),
            sources=validate.enums(Source, sources, field="source"),
            min_confidence=None if min_confidence is None else validate.confidence(min_confidence),
            project=validate.optional_id(project, field="project"),
        )

    def project(self, principal: Principal, value: object) -> str | None:
        """A write's project: None, or an id registered in the principal's tenant (SCOPE-6);
        422 ``invalid_project_id`` otherwise."""
        ident = validate.optional_id(value, field="project")
        if ident is not None and not self.store.has_project(principal.tenant_id, ident):
            raise InvalidInput(
                f"project {ident!r} is not registered in this tenant (quipu projects create)",
                code="invalid_project_id",
                details={"field": "project", "project": ident},
            )
        return ident

    def review(
        self,
        principal: Principal,
        ref: ScopeRef,
        current: MemoryVersion,
        target: Status,
        given: object,
    ) -> str | None:
        """None when ``current -> target`` is no review; else the reason of an allowed review.

        An illegal move is 409 first (LIFE-1). A review needs a reviewer (an admin or the
        ``memory:review`` grant; 403 ``review_required``), who is not the key that wrote the
        content under review (:meth:`author`; 403 ``self_review``; LIFE-5), and a reason,
        ``given`` (422 ``reason_required``)."""
        if target is not current.status:
            check_transition(current.status, target)
        if not is_review(current.status, target):
            return None
        if not is_reviewer(principal):
            raise Forbidden(
                f"moving a memory from {current.status.value} to {target.value} is a review: "
                "it needs an admin key or the memory:review grant",
                code="review_required",
                details={"id": current.id},
            )
        self.not_author(principal, ref, current.id)
        why = reason(given)
        if not why or not why.strip():
            raise InvalidInput("a review needs a reason", code="reason_required")
        return why

    def author(self, ref: ScopeRef, memory_id: str) -> str | None:
        """The key that wrote the family's current content: the actor of the last version
        that set its text (a status move, a review or a judgement sets none)."""
        for version in reversed(self.store.history(ref, memory_id)):
            if version.relation in _CONTENT:
                return version.actor
        return None

    def not_author(self, principal: Principal, ref: ScopeRef, memory_id: str) -> None:
        """403 ``self_review`` when ``principal``'s key wrote the content it would judge."""
        if principal.key_id == self.author(ref, memory_id):
            raise Forbidden(
                "the key that wrote this memory cannot review or judge it; another reviewer must",
                code="self_review",
                details={"id": memory_id},
            )

    def page_size(self, limit: int | None) -> int:
        """A list page's size: ``limit`` within 1..``max_page``, the maximum when omitted."""
        return validate.bounded_int(
            self.limits.max_page if limit is None else limit,
            field="limit",
            low=1,
            high=self.limits.max_page,
        )

    def screen(self, record: object) -> None:
        """SAFE-1 and the stored-string rules on every field of ``record`` (a version or a
        change), before any embedding is spent on it; the store checks again when it writes
        (:mod:`quipu.storage.admission`). The error names the field's path and, for a secret,
        its kind and span, never the value."""
        admit(record)

    def injected(self, record: object) -> bool:
        """Whether any free-text field of ``record`` — text, quote, reason, tags, aliases,
        metadata keys and values — looks like a prompt injection (SAFE-2): such a write is
        stored ``quarantined``, out of every read path until a reviewer releases it."""
        return any(injected(value) for _, value in free_text(record))  # one verdict per text

    def audit(
        self,
        principal: Principal,
        action: str,
        targets: tuple[str, ...],
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Record one audit event for ``principal``'s act (SAFE-4)."""
        self.store.record_audit(
            AuditEvent(
                tenant_id=principal.tenant_id,
                at=self._clock(),
                actor_key=principal.key_id,
                surface=principal.surface,
                action=action,
                target_ids=targets,
                role=principal.role.value,
                agent_id=principal.agent_id,
                user_id=principal.user_id,
                reason=reason,
                details=dict(details or {}),
            )
        )


def reason(value: object) -> str | None:
    """A change's free-text reason: at most 1,000 characters, valid Unicode, no NUL; NFC."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise InvalidInput(
            "reason must be a string of at most 1000 characters",
            code="invalid_reason",
            details={"field": "reason"},
        )
    return validate.clean_string(value, "reason")


def not_found(memory_id: str) -> NotFound:
    """The one 404 for a missing and a foreign id alike (SCOPE-7)."""
    return NotFound(f"no memory {memory_id}", details={"id": memory_id})
