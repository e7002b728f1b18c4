"""Review of model output and quarantine, judgement, restore and merge (LIFE-5..7, MEM-3)."""

from __future__ import annotations

from dataclasses import replace

from quipu.core import validate
from quipu.core.auth import Actor
from quipu.core.governance import (
    AFFIRMED,
    REFUTED,
)
from quipu.core.lifecycle import FINAL, QUEUED, check_transition
from quipu.core.query import Cursor, Page
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Relation,
    Status,
    Trust,
)
from quipu.core.versions import Change
from quipu.errors import Conflict, InvalidInput, NotFound
from quipu.governance.base import (
    MAX_MERGE,
    GovernanceBase,
    need_reviewer,
    reason_text,
    required_reason,
)


class Reviewing(GovernanceBase):
    """Reviews, judgements, restore and merge."""

    # -- review of model output and quarantine (LIFE-5, LIFE-6) ------------------------------
    def review_queue(
        self,
        principal: Principal,
        *,
        status: object = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page:
        """The tenant's candidates and quarantined memories, newest first (reviewers)."""
        need_reviewer(principal)
        statuses = QUEUED
        if status is not None:
            one = validate.enum(Status, status, field="status")
            if one not in QUEUED:
                raise InvalidInput(
                    "the review queue holds candidate and quarantined memories",
                    code="invalid_status",
                    details={"field": "status"},
                )
            statuses = frozenset({one})
        size = self.guard.page_size(limit)
        at = None if cursor is None else Cursor.decode(cursor)
        return self.store.list_current(principal.tenant_id, statuses, at, size)

    def review(
        self,
        principal: Principal,
        memory_id: object,
        decision: object,
        *,
        reason: object,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Activate or reject a candidate or quarantined memory, with a reason (LIFE-5, 6).
        403 ``self_review`` for the key that wrote it; 409 ``not_in_review`` for a memory
        that awaits no review; 409 ``version_conflict`` when it changed since it was read."""
        need_reviewer(principal)
        if decision not in ("activate", "reject"):
            raise InvalidInput(
                "decision is activate or reject",
                code="invalid_decision",
                details={"field": "decision"},
            )
        target = Status.ACTIVE if decision == "activate" else Status.REJECTED
        ident = validate.identifier(memory_id, field="id")
        ref = self._locate(principal, ident)
        current = self._current(ref, ident)
        if current.status not in QUEUED:
            raise Conflict(
                f"memory {ident} is {current.status.value}, not awaiting review",
                code="not_in_review",
                details={"id": ident, "status": current.status.value},
            )
        self.guard.admit_write(principal)
        why = self.guard.review(principal, ref, current, target, reason)
        assert why is not None
        return self.memory.reviewed_move(principal, ref, current, target, why, expected_version)

    # -- judgement, restore, merge (MEM-3, LIFE-7) -------------------------------------------
    def affirm(
        self,
        principal: Principal,
        memory_id: object,
        *,
        reason: object,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Stamp ``affirmed`` with who and when on a new version; the memory becomes
        ``verified`` (CONSOL-3), and a refuted one active again."""
        return self._judge(principal, memory_id, AFFIRMED, reason, expected_version)

    def refute(
        self,
        principal: Principal,
        memory_id: object,
        *,
        reason: object,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Stamp ``refuted`` with who and when on a new version; the memory becomes
        ``rejected``: out of recall and list by default, kept in history (MEM-3)."""
        return self._judge(principal, memory_id, REFUTED, reason, expected_version)

    def _judge(
        self,
        principal: Principal,
        memory_id: object,
        verdict: str,
        given: object,
        expected_version: int | None,
    ) -> MemoryVersion:
        need_reviewer(principal)
        why = required_reason(given)
        ident = validate.identifier(memory_id, field="id")
        ref = self._locate(principal, ident)
        current = self._current(ref, ident)
        if current.status in QUEUED or current.status in FINAL:
            raise Conflict(
                f"memory {ident} is {current.status.value}: review it first, judge it after",
                code="illegal_transition",
                details={"id": ident, "from": current.status.value},
            )
        self.guard.not_author(principal, ref, ident)
        if verdict == REFUTED:
            status = Status.REJECTED
        else:
            status = Status.ACTIVE if current.status is Status.REJECTED else current.status
        if status is not current.status:
            check_transition(current.status, status)
        now = self._clock()
        change = Change(
            actor=principal.key_id,
            relation=Relation.JUDGES,
            reason=why,
            status=status,
            trust=Trust.VERIFIED if verdict == AFFIRMED else current.trust,
            provenance=replace(
                current.provenance, judged_by=principal.key_id, judged_at=now, verdict=verdict
            ),
        )
        self.guard.admit_write(principal)
        judged = self.store.append(
            ref,
            ident,
            change,
            expected_version,
            None,
            None,
            now,
            self.memory.limits.quota_per_owner,
            by=Actor.of(principal),
            graph=self.memory.graph_draft("fill"),  # GRAPH-1: a rejected one coming back
        )
        self.guard.audit(
            principal,
            f"memory.{'affirm' if verdict == AFFIRMED else 'refute'}",
            (ident,),
            reason=why,
            details={"version": judged.version, "status": judged.status.value},
        )
        return judged

    def restore(
        self,
        principal: Principal,
        memory_id: object,
        version: object,
        *,
        reason: object = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Write an earlier version's content as a new successor, relation ``restores``
        (LIFE-7): history is never rewound."""
        ref = self.guard.authorise(principal, memory_id, None, write=True)
        ident = str(memory_id)
        wanted = validate.bounded_int(version, field="version", low=1, high=2**31)
        versions = self.store.history(ref, ident)
        old = next((v for v in versions if v.version == wanted), None)
        if old is None or not versions:
            raise NotFound(
                f"memory {ident} has no version {wanted}", details={"id": ident, "version": wanted}
            )
        current = versions[-1]
        if current.status in FINAL:
            check_transition(current.status, Status.ACTIVE)
        change = Change(
            actor=principal.key_id,
            relation=Relation.RESTORES,
            reason=reason_text(reason),
            text=old.text,
            kind=old.kind,
            confidence=old.confidence,
            tags=old.tags,
            metadata=old.metadata,
            aliases=old.aliases,
            related_id=f"{ident}@{wanted}",
        )
        self.guard.screen(change)
        if self.guard.injected(change) and current.status is not Status.QUARANTINED:
            change = replace(change, status=Status.QUARANTINED)
        self.guard.admit_write(principal)
        vector, key = self._vector(ref, old.text, current.text)
        restored = self.store.append(
            ref,
            ident,
            change,
            expected_version,
            vector,
            key,
            self._clock(),
            self.memory.limits.quota_per_owner,
            by=Actor.of(principal),
            graph=self.memory.graph_draft("replace", old.text),  # GRAPH-1: the old text's
        )
        self.guard.audit(
            principal,
            "memory.restore",
            (ident,),
            reason=change.reason,
            details={"restored_version": wanted, "version": restored.version},
        )
        return restored

    def merge(
        self,
        principal: Principal,
        memory_ids: object,
        text: object,
        *,
        reason: object = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Make one family of several duplicates (LIFE-7): the first id survives with
        ``text`` on a new version (relation ``merges``, naming the others), and each other
        becomes ``superseded`` by it, in one transaction. All must be in one scope."""
        if not isinstance(memory_ids, list | tuple) or not 2 <= len(memory_ids) <= MAX_MERGE:
            raise InvalidInput(
                f"ids must be a list of 2 to {MAX_MERGE} memory ids",
                code="invalid_merge",
                details={"field": "ids"},
            )
        ids = [validate.identifier(i, field="ids") for i in memory_ids]
        if len(set(ids)) != len(ids):
            raise InvalidInput(
                "ids must be distinct", code="invalid_merge", details={"field": "ids"}
            )
        body = validate.text(text, max_bytes=self.memory.limits.max_text_bytes)
        refs = {self.guard.authorise(principal, i, None, write=True) for i in ids}
        if len(refs) != 1:
            raise InvalidInput(
                "merged memories must share one scope",
                code="invalid_merge",
                details={"field": "ids"},
            )
        ref = refs.pop()
        change = Change(
            actor=principal.key_id,
            relation=Relation.MERGES,
            reason=reason_text(reason),
            text=body,
            related_id=",".join(ids[1:]),
        )
        self.guard.screen(change)
        if self.guard.injected(change):
            change = replace(change, status=Status.QUARANTINED)
        self.guard.admit_write(principal)
        survivor = self._current(ref, ids[0])
        vector, key = self._vector(ref, body, survivor.text)
        merged = self.store.merge(
            ref,
            ids[0],
            change,
            expected_version,
            vector,
            key,
            ids[1:],
            self._clock(),
            by=Actor.of(principal),
        )
        self.guard.audit(
            principal,
            "memory.merge",
            tuple(ids),
            reason=change.reason,
            details={"version": merged.version},
        )
        return merged
