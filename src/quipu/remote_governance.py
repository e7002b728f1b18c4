"""The governance methods of :class:`quipu.Client` and :class:`quipu.AsyncClient` (issue 22):
erase and subject erasure, legal holds, the review queue, judgements, restore and merge,
snapshots, projects, the audit log, superadmin oversight and job control — every governance
route of the HTTP API, with the names and results of the embedded :class:`quipu.Quipu`.

Each method sends the request :mod:`quipu.wire_governance` spells; the two mixins differ only
in awaiting it. The server decides who may do what from the credential: a review or judgement
is made by the key's principal (a reviewer that did not write the version, LIFE-5), so these
methods take no ``reviewer`` name, which the one-principal embedded client needs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import anyio
import httpx

from quipu import wire
from quipu import wire_governance as gw
from quipu.core.auth import AuditEvent
from quipu.core.governance import Hold, Project, Snapshot, SubjectInfo
from quipu.core.jobs import Job
from quipu.core.query import Page
from quipu.core.records import MemoryVersion
from quipu.errors import Unavailable
from quipu.governance import Erased, Resolved
from quipu.wire import Call, Instant

T = TypeVar("T")


def _snapshot_body(
    ids: Sequence[str] | None,
    members: Sequence[Mapping[str, Any]] | None,
    label: str | None,
    recall_id: str | None = None,
) -> dict[str, Any]:
    return wire.given(
        {
            "ids": None if ids is None else list(ids),
            "members": None if members is None else [dict(m) for m in members],
            "label": label,
            "recall_id": recall_id,
        }
    )


def _timed_out(job: Job) -> Unavailable:
    return Unavailable(
        f"job {job.job_id} is still {job.status.value}",
        code="job_timeout",
        details={"job_id": job.job_id},
    )


class GovernanceCalls:
    """Governance on :class:`quipu.Client` (LIFE-4..8, SCOPE-6, SCOPE-8, SAFE-4)."""

    timeout: float | httpx.Timeout

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    # -- erase and legal holds (LIFE-4) ------------------------------------------------------
    def erase(self, memory_id: str, *, reason: str) -> Erased:
        """Remove the content of every version of a memory, leaving a tombstone (admins or
        the ``memory:erase`` grant; 409 ``legal_hold`` under a hold)."""
        return self._send(gw.erase(memory_id, {"reason": reason}))

    def erase_subject(self, user_id: str, *, reason: str, wait: bool = False) -> Job:
        """Queue the erasure of everything about one end user; with ``wait``, poll the job
        until the server's worker finished it (at most the client's timeout)."""
        job = self._send(gw.erase_subject(user_id, {"reason": reason}))
        if not wait:
            return job
        deadline, pause = time.monotonic() + wire.wait_seconds(self.timeout), 0.05
        while not wire.job_is_done(job):
            if time.monotonic() >= deadline:
                raise _timed_out(job)
            time.sleep(pause)
            pause = min(1.0, pause * 2)
            job = self.erasure_job(job.job_id)
        return job

    def erasure_job(self, job_id: str) -> Job:
        """A subject erasure's progress, and its final counts per table once it finished."""
        return self._send(gw.erasure_job(job_id))

    def hold(self, kind: str, target: str | None = None, *, reason: str) -> Hold:
        """Set a legal hold on a ``memory``, a ``subject`` or the ``tenant`` (admins)."""
        return self._send(gw.hold(wire.given({"kind": kind, "target": target, "reason": reason})))

    def release_hold(self, hold_id: str, *, reason: str) -> Hold:
        return self._send(gw.release_hold(hold_id, {"reason": reason}))

    def holds(self, *, include_released: bool = False) -> list[Hold]:
        return self._send(gw.holds({"include_released": include_released}))

    # -- review, judgement, restore, merge (LIFE-5..7, MEM-3) --------------------------------
    def review_queue(
        self, *, status: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> Page:
        """The candidates and quarantined memories awaiting review, newest first (reviewers)."""
        return self._send(gw.review_queue(wire.given(locals())))

    def review(
        self, memory_id: str, decision: str, *, reason: str, expected_version: int | None = None
    ) -> MemoryVersion:
        """``activate`` or ``reject`` a memory under review, as this key's principal."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return self._send(gw.review(memory_id, body))

    def affirm(
        self, memory_id: str, *, reason: str, expected_version: int | None = None
    ) -> MemoryVersion:
        body = wire.given(locals(), leave_out=["memory_id"])
        return self._send(gw.judge(memory_id, "affirm", body))

    def refute(
        self, memory_id: str, *, reason: str, expected_version: int | None = None
    ) -> MemoryVersion:
        """Refuted memories are withheld from recall and list (history and reviewers keep
        them)."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return self._send(gw.judge(memory_id, "refute", body))

    def restore(
        self,
        memory_id: str,
        version: int,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Write ``version``'s content as the memory's new version (relation ``restores``)."""
        body = wire.given(locals(), leave_out=["memory_id"])
        return self._send(gw.restore(memory_id, body))

    def merge(
        self,
        memory_ids: Sequence[str],
        text: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Merge duplicates of one scope into the first id (relation ``merges``)."""
        body = wire.given(locals(), leave_out=["memory_ids"]) | {"ids": list(memory_ids)}
        return self._send(gw.merge(body))

    # -- snapshots and projects (LIFE-8, SCOPE-6) --------------------------------------------
    def snapshot(
        self,
        *,
        ids: Sequence[str] | None = None,
        members: Sequence[Mapping[str, Any]] | None = None,
        label: str | None = None,
        recall_id: str | None = None,
    ) -> Snapshot:
        """Pin versions for a run: ``ids`` (current versions), ``members`` ({id, version}) or
        ``recall_id`` (what a merged recall showed this caller, as it was then)."""
        return self._send(gw.snapshot(_snapshot_body(ids, members, label, recall_id)))

    def resolve_snapshot(self, snapshot_id: str) -> Resolved:
        return self._send(gw.resolve_snapshot(snapshot_id))

    def create_project(self, project_id: str, *, name: str | None = None) -> Project:
        return self._send(gw.create_project(wire.given(locals())))

    def projects(self) -> list[Project]:
        return self._send(gw.projects())

    # -- the audit log, oversight and job control (SAFE-4, SCOPE-8) --------------------------
    def audit(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        """The tenant's audit log, newest first, and the next page's cursor (admins)."""
        return self._send(gw.audit(wire.given(locals())))

    def subjects(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[SubjectInfo], str | None]:
        """Every scope owner of the tenant with its live memories (superadmins; audited)."""
        return self._send(gw.subjects(wire.given(locals())))

    def oversight_list(
        self,
        *,
        scope: str | None = None,
        owner: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        statuses: Sequence[str] | None = None,
        as_of: Instant | None = None,
    ) -> Page:
        """Any subject's memories, or with no ``owner`` every owner's (superadmins)."""
        return self._send(gw.oversight_list(wire.given(locals())))

    def oversight_forget(self, memory_id: str, *, reason: str | None = None) -> MemoryVersion:
        """Forget any memory of the tenant (superadmins; audited)."""
        return self._send(gw.oversight_forget(memory_id, wire.given({"reason": reason})))

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job of the tenant (admins; audited ``job.cancel``)."""
        return self._send(gw.cancel_job(job_id))

    def retry_job(self, job_id: str) -> Job:
        """Queue a failed or cancelled job again (admins; audited ``job.retry``)."""
        return self._send(gw.retry_job(job_id))


class AsyncGovernanceCalls:
    """The methods of :class:`GovernanceCalls` on :class:`quipu.AsyncClient`, awaited."""

    timeout: float | httpx.Timeout

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def erase(self, memory_id: str, *, reason: str) -> Erased:
        return await self._send(gw.erase(memory_id, {"reason": reason}))

    async def erase_subject(self, user_id: str, *, reason: str, wait: bool = False) -> Job:
        job = await self._send(gw.erase_subject(user_id, {"reason": reason}))
        if not wait:
            return job
        with anyio.move_on_after(wire.wait_seconds(self.timeout)):
            pause = 0.05
            while not wire.job_is_done(job):
                await anyio.sleep(pause)
                pause = min(1.0, pause * 2)
                job = await self.erasure_job(job.job_id)
            return job
        raise _timed_out(job)

    async def erasure_job(self, job_id: str) -> Job:
        return await self._send(gw.erasure_job(job_id))

    async def hold(self, kind: str, target: str | None = None, *, reason: str) -> Hold:
        body = wire.given({"kind": kind, "target": target, "reason": reason})
        return await self._send(gw.hold(body))

    async def release_hold(self, hold_id: str, *, reason: str) -> Hold:
        return await self._send(gw.release_hold(hold_id, {"reason": reason}))

    async def holds(self, *, include_released: bool = False) -> list[Hold]:
        return await self._send(gw.holds({"include_released": include_released}))

    async def review_queue(
        self, *, status: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> Page:
        return await self._send(gw.review_queue(wire.given(locals())))

    async def review(
        self, memory_id: str, decision: str, *, reason: str, expected_version: int | None = None
    ) -> MemoryVersion:
        body = wire.given(locals(), leave_out=["memory_id"])
        return await self._send(gw.review(memory_id, body))

    async def affirm(
        self, memory_id: str, *, reason: str, expected_version: int | None = None
    ) -> MemoryVersion:
        body = wire.given(locals(), leave_out=["memory_id"])
        return await self._send(gw.judge(memory_id, "affirm", body))

    async def refute(
        self, memory_id: str, *, reason: str, expected_version: int | None = None
    ) -> MemoryVersion:
        body = wire.given(locals(), leave_out=["memory_id"])
        return await self._send(gw.judge(memory_id, "refute", body))

    async def restore(
        self,
        memory_id: str,
        version: int,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        body = wire.given(locals(), leave_out=["memory_id"])
        return await self._send(gw.restore(memory_id, body))

    async def merge(
        self,
        memory_ids: Sequence[str],
        text: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        body = wire.given(locals(), leave_out=["memory_ids"]) | {"ids": list(memory_ids)}
        return await self._send(gw.merge(body))

    async def snapshot(
        self,
        *,
        ids: Sequence[str] | None = None,
        members: Sequence[Mapping[str, Any]] | None = None,
        label: str | None = None,
        recall_id: str | None = None,
    ) -> Snapshot:
        return await self._send(gw.snapshot(_snapshot_body(ids, members, label, recall_id)))

    async def resolve_snapshot(self, snapshot_id: str) -> Resolved:
        return await self._send(gw.resolve_snapshot(snapshot_id))

    async def create_project(self, project_id: str, *, name: str | None = None) -> Project:
        return await self._send(gw.create_project(wire.given(locals())))

    async def projects(self) -> list[Project]:
        return await self._send(gw.projects())

    async def audit(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[AuditEvent], str | None]:
        return await self._send(gw.audit(wire.given(locals())))

    async def subjects(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[SubjectInfo], str | None]:
        return await self._send(gw.subjects(wire.given(locals())))

    async def oversight_list(
        self,
        *,
        scope: str | None = None,
        owner: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        statuses: Sequence[str] | None = None,
        as_of: Instant | None = None,
    ) -> Page:
        return await self._send(gw.oversight_list(wire.given(locals())))

    async def oversight_forget(self, memory_id: str, *, reason: str | None = None) -> MemoryVersion:
        return await self._send(gw.oversight_forget(memory_id, wire.given({"reason": reason})))

    async def cancel_job(self, job_id: str) -> Job:
        return await self._send(gw.cancel_job(job_id))

    async def retry_job(self, job_id: str) -> Job:
        return await self._send(gw.retry_job(job_id))
