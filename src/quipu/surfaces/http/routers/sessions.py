"""/v1/sessions: append and read turns (SESSION-1..3), request promotion (PROMO-1);
/v1/jobs: the durable queue for admins (JOB-1)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request

from quipu.core import validate
from quipu.core.jobs import JobStatus
from quipu.core.records import Principal, Role
from quipu.errors import Forbidden, NotFound
from quipu.jobs.visibility import job_view, visible_job
from quipu.runtime import Runtime
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.responses import JobOut, JobsOut, PromoteOut, TurnOut, TurnsOut
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["sessions"])
Who = Annotated[Principal, Depends(principal)]
Json = dict[str, Any]


def runtime(request: Request) -> Runtime:
    found: Runtime | None = request.app.state.runtime
    if found is None:
        raise NotFound("sessions are not enabled on this server")
    return found


Rt = Annotated[Runtime, Depends(runtime)]


class TurnBody(Body):
    role: str
    content: str
    metadata: dict[str, Any] | None = None
    expires_at: datetime | None = None
    observed_at: datetime | None = None


@router.post(
    "/sessions/{session_id}/turns",
    status_code=201,
    response_model=TurnOut,
    summary="Append a session turn",
)
def append_turn(session_id: str, body: TurnBody, rt: Rt, who: Who) -> SafeJSONResponse:
    turn = rt.sessions.append(
        who,
        session_id,
        body.role,
        body.content,
        metadata=body.metadata,
        expires_at=body.expires_at,
        observed_at=body.observed_at,
    )
    where = f"{wire_session(session_id)}/turns?after={turn.seq - 1}"
    return SafeJSONResponse(turn.to_dict(), status_code=201, headers={"Location": where})


@router.get(
    "/sessions/{session_id}/turns",
    response_model=TurnsOut,
    summary="Read a session's turns in order",
)
def session_history(
    session_id: str,
    rt: Rt,
    who: Who,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> SafeJSONResponse:
    turns = rt.sessions.history(who, session_id, after=after, limit=limit)
    return SafeJSONResponse({"turns": [t.to_dict() for t in turns]})


@router.post(
    "/sessions/{session_id}/promote",
    status_code=202,
    response_model=PromoteOut,
    summary="Promote a session",
)
def promote(session_id: str, rt: Rt, who: Who) -> SafeJSONResponse:
    job, created = rt.sessions.promote(who, session_id)
    return SafeJSONResponse(
        {"job": job_view(who, job), "created": created},
        status_code=202 if created else 200,
        headers={"Location": "/v1/jobs/" + quote(job.job_id, safe="")},
    )


def wire_session(session_id: str) -> str:
    return "/v1/sessions/" + quote(session_id, safe="")


def _admin(who: Principal) -> None:
    if who.role not in (Role.ADMIN, Role.SUPERADMIN):
        raise Forbidden("the job queue is for admins", code="forbidden")


@router.get("/jobs", response_model=JobsOut, summary="List jobs of this tenant (admins)")
def list_jobs(
    rt: Rt,
    who: Who,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> SafeJSONResponse:
    _admin(who)
    wanted = None if status is None else validate.enum(JobStatus, status, field="status")
    jobs = rt.queue.store.list_jobs(who.tenant_id, wanted, limit)
    return SafeJSONResponse({"items": [j.to_dict() for j in jobs]})


@router.get(
    "/jobs/{job_id}",
    response_model=JobOut,
    summary="Read a job: the caller's own, or any of the tenant's (admins)",
)
def get_job(job_id: str, rt: Rt, who: Who) -> SafeJSONResponse:
    """A non-admin sees its own jobs (the promotions of its sessions) as a handle: id, kind,
    status, attempts, times, error and result; anyone else's job is 404 like a missing one."""
    return SafeJSONResponse(job_view(who, visible_job(rt.queue.store, who, job_id)))


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobOut,
    summary="Cancel a queued or running job (admins)",
)
def cancel_job(job_id: str, rt: Rt, who: Who) -> SafeJSONResponse:
    # admins only, the tenant's own jobs; audited (SAFE-4)
    return SafeJSONResponse(rt.governance.job_cancel(who, job_id).to_dict())


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    summary="Queue a failed or cancelled job again (admins)",
)
def retry_job(job_id: str, rt: Rt, who: Who) -> SafeJSONResponse:
    # admins only, the tenant's own jobs; audited (SAFE-4)
    return SafeJSONResponse(rt.governance.job_retry(who, job_id).to_dict())
