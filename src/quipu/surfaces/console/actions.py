"""The console's governing pages and acts: affirm, refute, forget, restore, legal holds, erase,
the review queue, jobs and the audit log. Every act takes a reason, goes through the API's own
use case (so the API's checks and audit rows apply) and answers with a redirect (post, redirect,
get) and a one-time notice."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.jobs import JobStatus
from quipu.core.records import Status
from quipu.errors import InvalidInput
from quipu.surfaces.console.web import (
    Operator,
    back,
    console_of,
    one,
    operator,
    posted,
    render,
    required,
)

router = APIRouter()

#: Acts on a memory's page, each a form posting here with its reason.
MEMORY_ACTS = ("affirm", "refute", "forget", "restore", "hold", "erase", "review")
#: Audit events scanned for one filtered page of the log.
AUDIT_SCAN = 2000


@router.post("/memories/{memory_id}/{act}", include_in_schema=False)
async def memory_act(request: Request, memory_id: str, act: str) -> Response:
    who, form = await posted(request)
    if act not in MEMORY_ACTS:
        raise InvalidInput(f"unknown act {act!r}", code="invalid_act")
    ident = validate.identifier(memory_id, field="id")
    why = required(form, "reason", "a reason")
    seen = _version(one(form, "expected_version"))
    notice = await run_in_threadpool(_act, request, who, ident, act, why, seen, form)
    return back(request, f"/memories/{ident}", who, notice)


def _act(
    request: Request,
    who: Operator,
    ident: str,
    act: str,
    why: str,
    seen: int | None,
    form: dict[str, list[str]],
) -> str:
    console = console_of(request)
    gov = console.runtime.governance
    me = who.principal
    if act == "affirm":
        done = gov.affirm(me, ident, reason=why, expected_version=seen)
        return f"Affirmed: version {done.version}."
    if act == "refute":
        done = gov.refute(me, ident, reason=why, expected_version=seen)
        return f"Refuted: version {done.version} is rejected."
    if act == "forget":
        if who.superadmin:
            done = gov.oversight_forget(me, ident, reason=why)
        else:
            done = console.runtime.service.forget(me, ident, reason=why, expected_version=seen)
        return f"Forgotten: version {done.version} is unavailable to every reader."
    if act == "restore":
        wanted = _version(required(form, "version", "the version to restore"))
        done = gov.restore(me, ident, wanted, reason=why, expected_version=seen)
        return f"Restored version {wanted} as version {done.version}."
    if act == "hold":
        held = gov.hold(me, "memory", ident, reason=why)
        return f"Legal hold {held.hold_id} set: this memory cannot be erased until it is lifted."
    if act == "review":
        decision = required(form, "decision", "a decision")
        done = gov.review(me, ident, decision, reason=why, expected_version=seen)
        return f"Reviewed: the memory is {done.status.value} (version {done.version})."
    typed = one(form, "confirm")
    if typed != ident:
        raise InvalidInput(
            "to erase, type the memory's id exactly in the confirmation box",
            code="confirmation_required",
            details={"field": "confirm"},
        )
    gov.erase(me, ident, reason=why)
    return "Erased: every version's content is gone for good; a tombstone remains."


def _version(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 10:
        raise InvalidInput("expected_version must be a whole number", code="invalid_argument")
    return int(value)


@router.post("/holds/{hold_id}/release", include_in_schema=False)
async def release_hold(request: Request, hold_id: str) -> Response:
    who, form = await posted(request)
    why = required(form, "reason", "a reason")
    gov = console_of(request).runtime.governance
    released = await run_in_threadpool(lambda: gov.release_hold(who.principal, hold_id, reason=why))
    return back(request, "/holds", who, f"Hold {released.hold_id} lifted.")


@router.get("/holds", include_in_schema=False)
def holds(request: Request) -> HTMLResponse:
    who = operator(request)
    found = console_of(request).runtime.governance.holds(who.principal, include_released=True)
    return render(request, "holds.html", {"holds": found}, who=who)


@router.get("/review", include_in_schema=False)
def review_queue(
    request: Request, status: str | None = None, cursor: str | None = None
) -> HTMLResponse:
    who = operator(request)
    gov = console_of(request).runtime.governance
    page = gov.review_queue(who.principal, status=status or None, cursor=cursor or None, limit=50)
    context = {"page": page, "status": status, "statuses": [Status.CANDIDATE, Status.QUARANTINED]}
    return render(request, "review.html", context, who=who)


@router.get("/jobs", include_in_schema=False)
def jobs(request: Request, status: str | None = None) -> HTMLResponse:
    """The tenant's jobs (what GET /v1/jobs lists to admins), newest first."""
    who = operator(request)
    wanted = None if not status else validate.enum(JobStatus, status, field="status")
    found = console_of(request).runtime.queue.store.list_jobs(who.principal.tenant_id, wanted, 200)
    context = {"jobs": found, "status": status, "statuses": list(JobStatus)}
    return render(request, "jobs.html", context, who=who)


@router.post("/jobs/{job_id}/{act}", include_in_schema=False)
async def job_act(request: Request, job_id: str, act: str) -> Response:
    who, _ = await posted(request)
    gov = console_of(request).runtime.governance
    if act not in ("retry", "cancel"):
        raise InvalidInput(f"unknown act {act!r}", code="invalid_act")
    run = gov.job_retry if act == "retry" else gov.job_cancel
    job = await run_in_threadpool(run, who.principal, job_id)
    return back(request, "/jobs", who, f"Job {job.job_id} is {job.status.value}.")


@router.get("/audit", include_in_schema=False)
def audit(
    request: Request,
    action: str | None = None,
    actor: str | None = None,
    target: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    """The tenant's audit log, newest first; the filters are applied to the events read, at
    most :data:`AUDIT_SCAN` of them per page."""
    who = operator(request)
    gov = console_of(request).runtime.governance
    wanted = {"action": action or None, "actor": actor or None, "target": target or None}
    shown: list[AuditEvent] = []
    scanned = 0
    at = cursor or None
    while len(shown) < 100 and scanned < AUDIT_SCAN:
        events, at = gov.audit(who.principal, cursor=at, limit=200)
        scanned += len(events)
        shown += [e for e in events if _matches(e, wanted)]
        if at is None:
            break
    context: dict[str, Any] = {
        "events": shown[:100],
        "filters": wanted,
        "next_cursor": at,
        "scanned": scanned,
    }
    return render(request, "audit.html", context, who=who)


def _matches(event: AuditEvent, wanted: dict[str, str | None]) -> bool:
    if wanted["action"] and not event.action.startswith(wanted["action"]):
        return False
    if wanted["actor"] and event.actor_key != wanted["actor"]:
        return False
    return not (wanted["target"] and wanted["target"] not in event.target_ids)
