"""Erase, subject erasure and legal holds (LIFE-4)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from quipu.core import validate
from quipu.core.auth import Actor, AuditEvent
from quipu.core.governance import (
    EraseReport,
    Erasure,
    Hold,
    HoldKind,
    subject_of,
)
from quipu.core.jobs import Job, NewJob
from quipu.core.records import (
    MemoryVersion,
    Principal,
    ScopeRef,
    Status,
)
from quipu.errors import Conflict, InvalidInput, NotFound
from quipu.governance.base import (
    ERASE_SUBJECT,
    FAMILY_BATCH,
    PLANE_BATCH,
    SUBJECT_STAGES,
    TURN_BATCH,
    GovernanceBase,
    Progress,
    need_admin,
    need_eraser,
    required_reason,
)
from quipu.governance.holds import Reach, erase_path, held, under_holds
from quipu.graph.documents import forget_document
from quipu.guard import not_found
from quipu.jobs.queue import Lease


@dataclass(frozen=True)
class Erased:
    """The outcome of erasing one memory: its tombstone and what was removed, per table."""

    tombstone: MemoryVersion
    report: EraseReport

    def to_dict(self) -> dict[str, Any]:
        return {"tombstone": self.tombstone.to_dict(), **self.report.to_dict()}


class Erasing(GovernanceBase):
    """Erase and subject erasure under legal holds."""

    # -- erase and legal holds (LIFE-4) ------------------------------------------------------
    @erase_path("memory")
    def erase(self, principal: Principal, memory_id: object, *, reason: object) -> Erased:
        """Remove the content of every version of a family, leaving a tombstone (LIFE-4).

        404 for a missing or foreign id; 409 ``legal_hold`` (nothing changed, derived data
        included) under a hold on the memory, its subject or the tenant; 409
        ``illegal_transition`` when already erased."""
        need_eraser(principal)
        why = required_reason(reason)
        ident = validate.identifier(memory_id, field="id")
        ref = self._locate(principal, ident)
        current = self.store.get(ref, ident)
        if current is None:
            raise not_found(ident)
        if current.status is Status.ERASED:
            raise already_erased(ident)
        self.guard.admit_write(principal)
        erasure = self._erasure(principal, why)
        with under_holds(self.store, Reach.of(principal.tenant_id, [ident], [subject_of(ref)])):
            report = self._erase_families(principal.tenant_id, [ident], erasure)
            if not report.families:
                raise already_erased(ident)
            self.guard.audit(
                principal, "memory.erase", (ident,), reason=why, details=report.to_dict()
            )
        tomb = self.store.get(ref, ident)
        assert tomb is not None
        return Erased(tomb, report)

    def _erase_families(self, tenant_id: str, ids: Sequence[str], erasure: Erasure) -> EraseReport:
        """Families and everything derived from them, inside the caller's :func:`under_holds`:
        what later planes made of them first, then their versions, then what the compiled
        index and the graph read from their text."""
        report = self.erase_derived(tenant_id, ids, erasure)
        part = self.store.erase_families(tenant_id, ids, erasure)
        report.merge(part)
        if not part.families:
            return report
        redacted = self.store.index_redact(tenant_id, part.families)
        if redacted:  # the compiled index keeps no erased words
            report.add("memory_index_versions", redacted)
        # GRAPH-1: the facts, mentions and now-unnamed entities read from the erased text.
        report.add("graph_facts", self.store.graph_forget(tenant_id, part.families))
        return report

    @erase_path("subject")
    def erase_subject(
        self, principal: Principal, user_id: object, *, reason: object
    ) -> tuple[Job, bool]:
        """Queue the erasure of everything about one end user (its ``user`` and ``agent_user``
        memories, its session turns, what jobs kept of them): a durable job whose checkpoint
        shows progress and whose result counts what went, per table. 409 ``legal_hold`` now
        (nothing queued) under a hold on the tenant, the subject or one of its memories."""
        need_eraser(principal)
        why = required_reason(reason)
        user = validate.identifier(user_id, field="user_id")
        # Refused now, nothing queued, when a hold already covers the subject; each of the
        # job's batches is checked again under the one hold check (under_holds).
        blocking = self.store.blocking_holds(principal.tenant_id, user)
        if blocking:
            raise held(blocking)
        self.guard.admit_write(principal)
        payload = {
            "user_id": user,
            "reason": why,
            "actor": principal.key_id,
            "role": principal.role.value,
            "agent_id": principal.agent_id,
            "actor_user_id": principal.user_id,
            "surface": principal.surface,
        }
        job, created = self.store.enqueue_job(
            NewJob(principal.tenant_id, ERASE_SUBJECT, user, payload), self._clock()
        )
        self.guard.audit(
            principal,
            "subject.erase.request",
            (user,),
            reason=why,
            details={"job_id": job.job_id, "created": created},
        )
        return job, created

    def erasure_job(self, principal: Principal, job_id: object) -> Job:
        """A subject erasure's job, with its progress (checkpoint) and final counts (result)."""
        need_eraser(principal)
        ident = validate.identifier(job_id, field="job_id")
        job = self.store.get_job(ident)
        if job is None or job.tenant_id != principal.tenant_id or job.kind != ERASE_SUBJECT:
            raise NotFound(f"no erasure {ident}", details={"job_id": ident})
        return job

    def run_subject_erasure(self, lease: Lease, progress: Progress | None = None) -> dict[str, Any]:
        """The job handler of :meth:`erase_subject`: memories in batches, then session turns,
        each batch one transaction and one heartbeat (a resumed job continues where the
        last attempt stopped; holds are checked again in every batch)."""
        job = lease.job
        p = job.payload
        user = str(p["user_id"])
        by = Actor(
            key_id=str(p["actor"]),
            role=p.get("role"),
            agent_id=p.get("agent_id"),
            user_id=p.get("actor_user_id"),
            surface=str(p.get("surface") or "job"),
        )
        erasure = Erasure(by, str(p["reason"]), self._clock())
        total = EraseReport(counts=dict(job.checkpoint.get("counts") or {}))
        families = int(job.checkpoint.get("families") or 0)
        for stage in SUBJECT_STAGES:
            while True:
                erasure = replace(erasure, at=self._clock())
                if stage == "memories":
                    ids = self.store.subject_families(job.tenant_id, user, FAMILY_BATCH)
                    part = EraseReport()
                    if ids:
                        with under_holds(self.store, Reach.of(job.tenant_id, ids, [user])):
                            part = self._erase_families(job.tenant_id, ids, erasure)
                    done = len(part.families)
                elif stage in ("kv", "documents"):
                    part = self._erase_plane(stage, job.tenant_id, user, erasure)
                    done = part.counts.get("kv_keys" if stage == "kv" else "documents", 0)
                else:
                    with under_holds(self.store, Reach.of(job.tenant_id, (), [user])):
                        part = self.store.erase_subject_sessions(
                            job.tenant_id, user, erasure, TURN_BATCH
                        )
                    done = part.counts.get("session_turns", 0)
                families += len(part.families)
                total.merge(replace(part, families=[]))
                lease.heartbeat({"stage": stage, "families": families, "counts": total.counts})
                if progress is not None:
                    progress(stage, done)
                if done == 0:
                    break
        with under_holds(self.store, Reach.of(job.tenant_id, (), [user])):
            # the articles merged recall showed the subject's sessions (RECALL-9, LIFE-4)
            if shown := self.store.shown_erase_subject(job.tenant_id, user):
                total.add("knowledge_shown", shown)
            # text handed to jobs for the subject (a harvest batch not yet run)
            if handed := self.store.job_text_erase(job.tenant_id, user_id=user):
                total.add("job_payloads", handed)
        result = {
            "user_id": user,
            "families": families,
            "counts": dict(sorted(total.counts.items())),
        }
        self.store.record_audit(
            AuditEvent(
                tenant_id=job.tenant_id,
                at=self._clock(),
                actor_key=by.key_id,
                surface=by.surface,
                action="subject.erase",
                target_ids=(user,),
                role=by.role,
                agent_id=by.agent_id,
                user_id=by.user_id,
                reason=erasure.reason,
                details={"job_id": job.job_id, **result},
            )
        )
        return result

    def _erase_plane(self, plane: str, tenant_id: str, user: str, erasure: Erasure) -> EraseReport:
        """One batch of the subject's key/value entries or documents, each erased as its own
        compliance erase would (values, chunks, vectors, titles, reasons), audited with the
        job's reason."""
        report = EraseReport()
        found = (
            self.store.kv_subject_keys(tenant_id, user, PLANE_BATCH)
            if plane == "kv"
            else self.store.doc_subject_ids(tenant_id, user, PLANE_BATCH)
        )
        if found:
            with under_holds(self.store, Reach.of(tenant_id, (), [user])):
                self._erase_plane_batch(plane, found, user, erasure, report)
        return report

    def _erase_plane_batch(
        self,
        plane: str,
        found: Sequence[tuple[ScopeRef, str]],
        user: str,
        erasure: Erasure,
        report: EraseReport,
    ) -> None:
        by = erasure.by
        for ref, ident in found:
            audit = AuditEvent(
                tenant_id=ref.tenant_id,
                at=erasure.at,
                actor_key=by.key_id,
                surface=by.surface,
                action="kv.erase" if plane == "kv" else "document.erase",
                target_ids=(ident,),
                role=by.role,
                agent_id=by.agent_id,
                user_id=by.user_id,
                reason=erasure.reason,
                details={"scope": ref.scope.value, "subject": user},
            )
            if plane == "kv":
                report.add("kv_entries", self.store.kv_erase(ref, ident, audit))
                report.add("kv_keys", 1)
            else:
                document = self.store.doc_get(ref, ident)
                if document is not None:  # what the graph read from its chunks goes first
                    report.add("graph_facts", forget_document(self.store, document))
                report.add("doc_chunks", self.store.doc_erase(ref, ident, audit))
                report.add("documents", 1)

    def erase_derived(self, tenant_id: str, ids: Sequence[str], erasure: Erasure) -> EraseReport:
        """Run every derived eraser (:mod:`quipu.governance.derived`) over ``ids``: what later
        planes made of these families goes before the families do."""
        report = EraseReport()
        if not ids:
            return report
        for eraser in self.derived_erasers:
            for table, count in eraser(tenant_id, ids, erasure).items():
                report.add(table, count)
        return report

    def hold(self, principal: Principal, kind: object, target: object, *, reason: object) -> Hold:
        """Set a legal hold on a memory, a subject (end user id) or the tenant (admins)."""
        need_admin(principal)
        why = required_reason(reason)
        hold_kind = validate.enum(HoldKind, kind, field="kind")
        if hold_kind is HoldKind.TENANT:
            aim = (
                principal.tenant_id
                if target is None
                else validate.identifier(target, field="target")
            )
            if aim != principal.tenant_id:
                raise InvalidInput("a tenant hold names this tenant", code="invalid_target")
        else:
            aim = validate.identifier(target, field="target")
            if hold_kind is HoldKind.MEMORY:
                self._locate(principal, aim)
        held = Hold(
            principal.tenant_id,
            uuid.uuid4().hex,
            hold_kind,
            aim,
            why,
            principal.key_id,
            self._clock(),
        )
        self.store.put_hold(held)
        self.guard.audit(
            principal,
            "hold.set",
            (held.hold_id,),  # not the target's id: an erase keeps the reasons of holds
            reason=why,
            details={"kind": hold_kind.value, "target": aim},
        )
        return held

    def release_hold(self, principal: Principal, hold_id: object, *, reason: object) -> Hold:
        need_admin(principal)
        why = required_reason(reason)
        ident = validate.identifier(hold_id, field="hold_id")
        released = self.store.release_hold(
            principal.tenant_id, ident, principal.key_id, self._clock(), why
        )
        if released is None:
            raise NotFound(f"no active hold {ident}", details={"hold_id": ident})
        self.guard.audit(
            principal,
            "hold.release",
            (ident,),
            reason=why,
            details={"kind": released.kind.value, "target": released.target},
        )
        return released

    def holds(self, principal: Principal, *, include_released: bool = False) -> list[Hold]:
        need_admin(principal)
        return self.store.list_holds(principal.tenant_id, include_released)


def already_erased(ident: str) -> Conflict:
    return Conflict(
        f"memory {ident} is erased already",
        code="illegal_transition",
        details={"id": ident, "from": Status.ERASED.value, "to": Status.ERASED.value},
    )
