"""The console's pages over the other planes: sessions with their turns, promotion jobs and
what was promoted from them; knowledge articles with their history; and a tenant's subjects
for a tenant admin, with the erasure of an end user (LIFE-4). Reads go through
:class:`~quipu.inspection.Inspection` and :class:`~quipu.knowledge.KnowledgeService`, the act
through the governance use case the API calls, so authorisation and audit are the API's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from quipu.core import validate
from quipu.errors import InvalidInput
from quipu.inspection import MAX_TURNS
from quipu.surfaces.console.diff import word_diff
from quipu.surfaces.console.web import back, console_of, one, operator, posted, render, required

router = APIRouter()


@router.get("/sessions", include_in_schema=False)
def sessions(request: Request, scope: str | None = None, owner: str | None = None) -> HTMLResponse:
    """The tenant's sessions, or one subject's (``scope`` and ``owner`` as on Subjects)."""
    who = operator(request)
    named = bool(scope or owner)
    found = console_of(request).inspection.sessions(
        who.principal, scope=scope if named else None, owner=owner if named else None
    )
    context = {"sessions": found, "scope": scope if named else None, "owner": owner}
    return render(request, "sessions.html", context, who=who)


@router.get("/session", include_in_schema=False)
def session(request: Request, owner: str, id: str) -> HTMLResponse:
    """One session: its turns with roles and times, its promotion and what it promoted."""
    who = operator(request)
    view = console_of(request).inspection.session(who.principal, owner, id)
    context = {"view": view, "max_turns": MAX_TURNS}
    return render(request, "session.html", context, who=who)


@router.get("/knowledge", include_in_schema=False)
def knowledge(request: Request) -> HTMLResponse:
    who = operator(request)
    found = console_of(request).inspection.articles(who.principal)
    return render(request, "knowledge.html", {"articles": found}, who=who)


@router.get("/knowledge/{article_id}", include_in_schema=False)
def article(request: Request, article_id: str, as_of: str | None = None) -> HTMLResponse:
    """An article (as of an instant when asked) and every version as a diff of its body."""
    who = operator(request)
    plane = console_of(request).knowledge
    at = validate.instant(as_of, field="as_of") if as_of else None
    shown = plane.get(who.principal, article_id, as_of=at)
    versions = plane.history(who.principal, article_id)
    rows: list[dict[str, Any]] = []
    for index, version in enumerate(versions):
        before = versions[index - 1] if index else None
        rows.append(
            {
                "v": version,
                "title_diff": word_diff(before.title if before else "", version.title),
                "diff": word_diff(before.body if before else "", version.body),
            }
        )
    rows.reverse()
    context = {
        "shown": shown,
        "current": versions[-1] if versions else shown,
        "rows": rows,
        "as_of": at,
        "as_of_value": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] if at else "",
    }
    return render(request, "article.html", context, who=who)


@router.get("/erase-subject", include_in_schema=False)
def erase_subject_form(request: Request, user: str) -> HTMLResponse:
    who = operator(request)
    ident = validate.identifier(user, field="user")
    return render(request, "erase_subject.html", {"user": ident}, who=who)


@router.post("/erase-subject", include_in_schema=False)
async def erase_subject(request: Request) -> Response:
    """Queue the erasure of everything about one end user (LIFE-4): the API's use case, its
    legal-hold check (409 ``legal_hold``, nothing queued) and its audit row; the user's id
    typed again as confirmation."""
    who, form = await posted(request)
    user = validate.identifier(required(form, "user", "the end user"), field="user")
    why = required(form, "reason", "a reason")
    if one(form, "confirm") != user:
        raise InvalidInput(
            "to erase, type the end user's id exactly in the confirmation box",
            code="confirmation_required",
            details={"field": "confirm"},
        )
    gov = console_of(request).runtime.governance
    job, created = await run_in_threadpool(
        lambda: gov.erase_subject(who.principal, user, reason=why)
    )
    state = "queued" if created else "already queued"
    return back(request, "/jobs", who, f"Erasure of {user} {state} as job {job.job_id}.")
