"""Governance routes (LIFE-4..8, SCOPE-6, SCOPE-8, SAFE-4): erase and subject erasure, legal
holds, the review queue, judgements, restore and merge, snapshots, projects, operator oversight
and the audit log. Each calls :class:`~quipu.governance.GovernanceService`; the same codes as
the library and the CLI."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from quipu.core.records import MemoryVersion, Principal
from quipu.errors import NotFound
from quipu.governance import GovernanceService
from quipu.surfaces.forgetting import forget_once
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.responses import (
    AuditPageOut,
    EraseOut,
    HoldOut,
    HoldsOut,
    JobOut,
    MemoryOut,
    MemoryPageOut,
    ProjectOut,
    ProjectsOut,
    PromoteOut,
    SnapshotOut,
    SubjectPageOut,
)
from quipu.surfaces.http.schemas import Body

#: Endpoints answer with :class:`SafeJSONResponse` themselves (documented by the typed models of
#: :mod:`..responses`), as the memories router does: a stored value JSON cannot carry never
#: turns a read into a 500.
router = APIRouter(prefix="/v1", tags=["governance"])
Who = Annotated[Principal, Depends(principal)]


async def governance(request: Request) -> GovernanceService:
    """The runtime's governance use cases; an app built without a runtime gets its own over the
    app's memory service on first use. Async: it does no I/O."""
    found: GovernanceService | None = request.app.state.governance
    if found is None:
        found = request.app.state.governance = GovernanceService(request.app.state.service)
    return found


Gov = Annotated[GovernanceService, Depends(governance)]


class ReasonBody(Body):
    reason: str = Field(description="Why (required; audited, never content to erase).")


class JudgeBody(Body):
    reason: str = Field(description="Why the reviewer affirms or refutes it (required).")
    expected_version: int | None = Field(
        None, description="The version you judged (required, LIFE-2: 428 without)."
    )


class ReviewBody(Body):
    decision: str = Field(description="activate or reject.")
    reason: str = Field(description="Why (required).")
    expected_version: int | None = Field(
        None, description="The version you reviewed (required, LIFE-2: 428 without)."
    )


class RestoreBody(Body):
    version: int = Field(description="The version whose content becomes the new successor.")
    reason: str | None = None
    expected_version: int | None = Field(
        None, description="The current version you replace (required, LIFE-2: 428 without)."
    )


class MergeBody(Body):
    ids: list[str] = Field(description="2-20 ids of one scope; the first survives.")
    text: str = Field(description="The merged text of the survivor's new version.")
    reason: str | None = None
    expected_version: int | None = Field(
        None, description="The survivor's current version (required, LIFE-2: 428 without)."
    )


class HoldBody(Body):
    kind: str = Field(description="memory, subject or tenant.")
    target: str | None = Field(None, description="Memory id, end user id, or the tenant id.")
    reason: str


class MemberField(Body):
    id: str
    version: int


class SnapshotBody(Body):
    ids: list[str] | None = Field(None, description="Pin each memory's current version.")
    members: list[MemberField] | None = Field(None, description="Pin these exact versions.")
    recall_id: str | None = Field(
        None, description="Pin what this merged recall showed you, as it was then."
    )
    label: str | None = None


class ProjectBody(Body):
    project_id: str
    name: str | None = None


# -- erase and legal holds (LIFE-4) ------------------------------------------------------------
@router.post(
    "/memories/{memory_id}/erase",
    response_model=EraseOut,
    summary="Erase a memory's content (compliance)",
)
def erase(memory_id: str, body: ReasonBody, gov: Gov, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(gov.erase(who, memory_id, reason=body.reason).to_dict())


@router.post(
    "/subjects/{user_id}/erase",
    response_model=PromoteOut,
    status_code=202,
    summary="Erase everything of one end user",
    responses={200: {"description": "That subject's erasure is already queued or running"}},
)
def erase_subject(user_id: str, body: ReasonBody, gov: Gov, who: Who) -> SafeJSONResponse:
    job, created = gov.erase_subject(who, user_id, reason=body.reason)
    return SafeJSONResponse(
        {"job": job.to_dict(), "created": created},
        status_code=202 if created else 200,
        headers={"Location": _at("erasures", job.job_id)},
    )


@router.get(
    "/erasures/{job_id}",
    response_model=JobOut,
    summary="A subject erasure's progress and final counts",
)
def erasure(job_id: str, gov: Gov, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(gov.erasure_job(who, job_id).to_dict())


@router.post("/holds", response_model=HoldOut, status_code=201, summary="Set a legal hold (admins)")
def set_hold(body: HoldBody, gov: Gov, who: Who) -> SafeJSONResponse:
    hold = gov.hold(who, body.kind, body.target, reason=body.reason)
    return SafeJSONResponse(
        hold.to_dict(), status_code=201, headers={"Location": _at("holds", hold.hold_id)}
    )


@router.get("/holds", response_model=HoldsOut, summary="Legal holds of the tenant (admins)")
def list_holds(gov: Gov, who: Who, include_released: bool = False) -> SafeJSONResponse:
    return SafeJSONResponse(
        {"items": [h.to_dict() for h in gov.holds(who, include_released=include_released)]}
    )


@router.get("/holds/{hold_id}", response_model=HoldOut, summary="One legal hold (admins)")
def get_hold(hold_id: str, gov: Gov, who: Who) -> SafeJSONResponse:
    found = [h for h in gov.holds(who, include_released=True) if h.hold_id == hold_id]
    if not found:
        raise NotFound(f"no legal hold {hold_id[:64]!r} in this tenant", code="not_found")
    return SafeJSONResponse(found[0].to_dict())


@router.post(
    "/holds/{hold_id}/release", response_model=HoldOut, summary="Lift a legal hold (admins)"
)
def release_hold(hold_id: str, body: ReasonBody, gov: Gov, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(gov.release_hold(who, hold_id, reason=body.reason).to_dict())


# -- review, judgement, restore, merge (LIFE-5..7, MEM-3) ------------------------------------
@router.get(
    "/review",
    response_model=MemoryPageOut,
    summary="The review queue: candidates and quarantined memories",
)
def review_queue(
    gov: Gov,
    who: Who,
    status: str | None = None,
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> SafeJSONResponse:
    page = gov.review_queue(who, status=status, cursor=cursor, limit=limit)
    return SafeJSONResponse(
        {"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}
    )


@router.post(
    "/review/{memory_id}",
    response_model=MemoryOut,
    summary="Activate or reject a memory under review",
)
def review(memory_id: str, body: ReviewBody, gov: Gov, who: Who) -> SafeJSONResponse:
    gov.version_named(who, memory_id, body.expected_version, tenant_wide=True)
    return SafeJSONResponse(
        gov.review(
            who,
            memory_id,
            body.decision,
            reason=body.reason,
            expected_version=body.expected_version,
        ).to_dict()
    )


@router.post(
    "/memories/{memory_id}/affirm", response_model=MemoryOut, summary="Affirm a memory (reviewers)"
)
def affirm(memory_id: str, body: JudgeBody, gov: Gov, who: Who) -> SafeJSONResponse:
    gov.version_named(who, memory_id, body.expected_version, tenant_wide=True)
    judged = gov.affirm(who, memory_id, reason=body.reason, expected_version=body.expected_version)
    return SafeJSONResponse(judged.to_dict())


@router.post(
    "/memories/{memory_id}/refute", response_model=MemoryOut, summary="Refute a memory (reviewers)"
)
def refute(memory_id: str, body: JudgeBody, gov: Gov, who: Who) -> SafeJSONResponse:
    gov.version_named(who, memory_id, body.expected_version, tenant_wide=True)
    judged = gov.refute(who, memory_id, reason=body.reason, expected_version=body.expected_version)
    return SafeJSONResponse(judged.to_dict())


@router.post(
    "/memories/{memory_id}/restore",
    response_model=MemoryOut,
    summary="Restore an earlier version's content",
)
def restore(memory_id: str, body: RestoreBody, gov: Gov, who: Who) -> SafeJSONResponse:
    gov.version_named(who, memory_id, body.expected_version, tenant_wide=False)
    return SafeJSONResponse(
        gov.restore(
            who,
            memory_id,
            body.version,
            reason=body.reason,
            expected_version=body.expected_version,
        ).to_dict()
    )


@router.post(
    "/memories/merge", response_model=MemoryOut, summary="Merge duplicates into one family"
)
def merge(body: MergeBody, gov: Gov, who: Who) -> SafeJSONResponse:
    survivor = body.ids[0] if body.ids else ""
    gov.version_named(who, survivor, body.expected_version, tenant_wide=False)
    return SafeJSONResponse(
        gov.merge(
            who, body.ids, body.text, reason=body.reason, expected_version=body.expected_version
        ).to_dict()
    )


# -- snapshots and projects (LIFE-8, SCOPE-6) --------------------------------------------------
@router.post(
    "/snapshots",
    response_model=SnapshotOut,
    status_code=201,
    summary="Pin exact versions for a run",
)
def snapshot_create(body: SnapshotBody, gov: Gov, who: Who) -> SafeJSONResponse:
    members = None if body.members is None else [m.model_dump() for m in body.members]
    snap = gov.snapshot_create(
        who, ids=body.ids, members=members, label=body.label, recall_id=body.recall_id
    )
    return SafeJSONResponse(
        snap.to_dict(), status_code=201, headers={"Location": _at("snapshots", snap.snapshot_id)}
    )


@router.get(
    "/snapshots/{snapshot_id}",
    response_model=SnapshotOut,
    summary="Resolve a snapshot (fails closed per member)",
)
def snapshot_resolve(snapshot_id: str, gov: Gov, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(gov.snapshot_resolve(who, snapshot_id).to_dict())


@router.post(
    "/projects",
    response_model=ProjectOut,
    status_code=201,
    summary="Register a project (admins, tenant:write)",
)
def project_create(body: ProjectBody, gov: Gov, who: Who) -> SafeJSONResponse:
    project = gov.project_create(who, body.project_id, name=body.name)
    where = _at("projects", project.project_id)
    return SafeJSONResponse(project.to_dict(), status_code=201, headers={"Location": where})


@router.get("/projects", response_model=ProjectsOut, summary="The tenant's projects")
def projects(gov: Gov, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse({"items": [p.to_dict() for p in gov.projects(who)]})


@router.get("/projects/{project_id}", response_model=ProjectOut, summary="One project")
def project(project_id: str, gov: Gov, who: Who) -> SafeJSONResponse:
    found = [p for p in gov.projects(who) if p.project_id == project_id]
    if not found:
        raise NotFound(f"no project {project_id[:64]!r} in this tenant", code="not_found")
    return SafeJSONResponse(found[0].to_dict())


def _at(collection: str, ident: str) -> str:
    """The ``Location`` of what a 201 or 202 made (issue 27)."""
    return f"/v1/{collection}/{quote(ident, safe='')}"


# -- oversight and the audit log (SCOPE-8, SAFE-4) -----------------------------------------------
@router.get("/audit", response_model=AuditPageOut, summary="The tenant's audit log (admins)")
def audit(
    gov: Gov,
    who: Who,
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> SafeJSONResponse:
    events, next_cursor = gov.audit(who, cursor=cursor, limit=limit)
    return SafeJSONResponse({"items": [e.to_dict() for e in events], "next_cursor": next_cursor})


@router.get(
    "/admin/subjects",
    response_model=SubjectPageOut,
    summary="Every subject of the tenant (superadmin oversight)",
)
def subjects(
    gov: Gov,
    who: Who,
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> SafeJSONResponse:
    found, next_cursor = gov.subjects(who, cursor=cursor, limit=limit)
    return SafeJSONResponse({"items": [s.to_dict() for s in found], "next_cursor": next_cursor})


@router.get(
    "/admin/memories",
    response_model=MemoryPageOut,
    summary="List any subject's memories (superadmin oversight)",
)
def oversight_list(
    gov: Gov,
    who: Who,
    scope: str | None = None,
    owner: str | None = None,
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    statuses: Annotated[list[str] | None, Query()] = None,
    as_of: datetime | None = None,
) -> SafeJSONResponse:
    page = gov.oversight_list(
        who,
        scope=scope,
        owner=owner,
        cursor=cursor,
        limit=limit,
        statuses=statuses,
        as_of=as_of,
    )
    return SafeJSONResponse(
        {"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}
    )


@router.delete(
    "/admin/memories/{memory_id}",
    response_model=MemoryOut,
    summary="Forget any memory (superadmin oversight)",
)
def oversight_forget(
    memory_id: str, gov: Gov, who: Who, reason: str | None = None
) -> SafeJSONResponse:
    """Kept for clients that cannot send a body with DELETE; a reason here travels in the URL,
    so prefer ``POST /v1/admin/memories/{id}/forget``."""
    return SafeJSONResponse(_forget_once(gov, who, memory_id, reason).to_dict())


class OversightForgetBody(Body):
    reason: str | None = Field(None, description="Why (audited).")


@router.post(
    "/admin/memories/{memory_id}/forget",
    response_model=MemoryOut,
    summary="Forget any memory, the reason in the body (superadmin oversight)",
)
def oversight_forget_with_body(
    memory_id: str, body: OversightForgetBody, gov: Gov, who: Who
) -> SafeJSONResponse:
    """The reason never enters a URL or an access log (issue 20 defect 4)."""
    return SafeJSONResponse(_forget_once(gov, who, memory_id, body.reason).to_dict())


def _forget_once(
    gov: GovernanceService, who: Principal, memory_id: str, reason: str | None
) -> MemoryVersion:
    """Forgetting twice answers the forgotten memory again (idempotent, issue 27)."""

    def versions() -> list[MemoryVersion]:
        ref = gov.store.locate(who.tenant_id, memory_id)
        return [] if ref is None else gov.store.history(ref, memory_id)

    return forget_once(lambda: gov.oversight_forget(who, memory_id, reason=reason), versions)
