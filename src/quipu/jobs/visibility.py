"""Which jobs a caller may read (JOB-1, API-1): its own, or any of its tenant's for an admin.

A job is the caller's own when it acts for the caller's subject (a promotion of the caller's
session: the payload's ``owner``). Anyone else's job looks exactly like a missing one (404,
SCOPE-7). A non-admin is shown a handle (id, kind, status, attempts, times, error, result),
not the queue's internals (payload, lease, fencing token)."""

from __future__ import annotations

from typing import Any

from quipu.core import validate
from quipu.core.jobs import Job, JobStatus
from quipu.core.records import Principal, Role
from quipu.core.sessions import session_owner
from quipu.errors import Forbidden, NotFound
from quipu.storage.base import Store

ADMINS = (Role.ADMIN, Role.SUPERADMIN)
#: What a non-admin sees of its own job.
HANDLE_FIELDS = (
    "job_id",
    "kind",
    "status",
    "attempts",
    "max_attempts",
    "run_after",
    "created_at",
    "updated_at",
    "last_error",
    "result",
    "finished_at",
)


def visible_job(store: Store, principal: Principal, job_id: object) -> Job:
    ident = validate.identifier(job_id, field="job_id")
    job = store.get_job(ident)
    if job is None or job.tenant_id != principal.tenant_id or not _sees(principal, job):
        raise NotFound(f"no job {ident}", details={"job_id": ident})
    return job


def visible_jobs(
    store: Store, principal: Principal, *, status: object = None, limit: object = 100
) -> list[Job]:
    """The tenant's jobs, newest first: the whole queue is for admins only."""
    if principal.role not in ADMINS:
        raise Forbidden("the job queue is for admins", code="forbidden")
    wanted = None if status is None else validate.enum(JobStatus, status, field="status")
    size = validate.bounded_int(limit, field="limit", low=1, high=500)
    return store.list_jobs(principal.tenant_id, wanted, size)


def job_view(principal: Principal, job: Job) -> dict[str, Any]:
    """The job as ``principal`` may see it: everything for an admin, else the handle."""
    if principal.role in ADMINS:
        return job.to_dict()
    return job_handle(job)


def job_handle(job: Job) -> dict[str, Any]:
    """What a caller needs to follow a job it asked for (:data:`HANDLE_FIELDS`), whoever it
    is: ``memory_promote`` answers this to admins too (issue 27)."""
    data = job.to_dict()
    return {name: data[name] for name in HANDLE_FIELDS}


def _sees(principal: Principal, job: Job) -> bool:
    if principal.role in ADMINS:
        return True
    return job.payload.get("owner") == session_owner(principal)
