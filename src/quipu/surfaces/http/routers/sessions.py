"""/v1/sessions: append and read turns (SESSION-1..3), request promotion (PROMO-1);
/v1/jobs: the durable queue for admins (JOB-1)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from quipu.core import validate
from quipu.core.jobs import JobStatus
from quipu.core.records import Principal, Role
from quipu.errors import Forbidden, NotFound
from quipu.runtime import Runtime
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["sessions"])
Who = Annotated[Principal, Depends(principal)]


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


@router.post("/sessions/{session_id}/turns", status_code=201, summary="Append a session turn")
def append_turn(session_id: str, body: TurnBody, rt: Rt, who: Who) -> dict[str, Any]:
    turn = rt.sessions.append(
        who,
        session_id,
        body.role,
        body.content,
        metadata=body.metadata,
        expires_at=body.expires_at,
    )
    return turn.to_dict()


@router.get("/sessions/{session_id}/turns", summary="Read a session's turns in order")
def session_history(
    session_id: str,
    rt: Rt,
    who: Who,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    turns = rt.sessions.history(who, session_id, after=after, limit=limit)
    return {"turns": [t.to_dict() for t in turns]}


@router.post("/sessions/{session_id}/promote", status_code=202, summary="Promote a session")
def promote(session_id: str, rt: Rt, who: Who, response: Response) -> dict[str, Any]:
    job, created = rt.sessions.promote(who, session_id)
    if not created:
        response.status_code = 200
    return {"job": job.to_dict(), "created": created}


def _admin(who: Principal) -> None:
    if who.role not in (Role.ADMIN, Role.SUPERADMIN):
        raise Forbidden("the job queue is for admins", code="forbidden")


@router.get("/jobs", summary="List jobs of this tenant (admins)")
def list_jobs(
    rt: Rt,
    who: Who,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    _admin(who)
    wanted = None if status is None else validate.enum(JobStatus, status, field="status")
    jobs = rt.queue.store.list_jobs(who.tenant_id, wanted, limit)
    return {"items": [j.to_dict() for j in jobs]}


@router.post("/jobs/{job_id}/cancel", summary="Cancel a queued or running job (admins)")
def cancel_job(job_id: str, rt: Rt, who: Who) -> dict[str, Any]:
    return rt.governance.job_cancel(who, job_id).to_dict()  # admins only; audited (SAFE-4)


@router.post("/jobs/{job_id}/retry", summary="Queue a failed or cancelled job again (admins)")
def retry_job(job_id: str, rt: Rt, who: Who) -> dict[str, Any]:
    return rt.governance.job_retry(who, job_id).to_dict()  # admins only; audited (SAFE-4)
