"""The console's reading pages: sign-in and out, the tenant pick, subjects, search, a memory's
page and health. Memory text appears only in page bodies (escaped), never in a URL: a search is
a POST, and links name memories by id."""

from __future__ import annotations

import json
import secrets
import shlex
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from quipu.core import validate
from quipu.core.jobs import JobStatus
from quipu.core.records import Kind, Principal, Scope, ScopeRef, Status
from quipu.core.scopes import check_write, resolve_scope
from quipu.errors import InvalidInput, QuipuError
from quipu.surfaces import metrics
from quipu.surfaces.console.diff import changed_fields, version_at, word_diff
from quipu.surfaces.console.sessions import same_token
from quipu.surfaces.console.web import (
    COOKIE,
    LOGIN_COOKIE,
    Console,
    Operator,
    authenticate,
    back,
    console_of,
    cookie_args,
    one,
    operator,
    posted,
    read_form,
    redirect,
    render,
    required,
)

router = APIRouter()
#: The health page counts at most this many jobs of each status.
HEALTH_JOBS = 1000

KINDS = [k.value for k in Kind]
#: Statuses a list or a search may ask for (forgotten, quarantined and erased never: LIFE-3, 6).
LISTED_STATUSES = [
    "active",
    "candidate",
    "stale",
    "conflicted",
    "superseded",
    "rejected",
    "archived",
    "expired",
]


@router.get("/", include_in_schema=False)
def home(request: Request) -> Response:
    operator(request)
    return redirect(request, "/subjects")


@router.get("/sign-in", include_in_schema=False)
def sign_in_form(request: Request) -> HTMLResponse:
    return _sign_in_page(request, None, 200)


def _sign_in_page(request: Request, error: str | None, status: int) -> HTMLResponse:
    token = secrets.token_urlsafe(32)
    page = render(request, "sign_in.html", {"csrf": token, "error": error}, status=status)
    page.set_cookie(LOGIN_COOKIE, token, max_age=1800, **cookie_args(request))
    return page


@router.post("/sign-in", include_in_schema=False)
async def sign_in(request: Request) -> Response:
    console = console_of(request)
    form = await read_form(request)
    expected = request.cookies.get(LOGIN_COOKIE)
    if expected is None or not same_token(expected, one(form, "csrf")):
        return _sign_in_page(request, "The form expired or was not sent from this page.", 403)
    secret = one(form, "key")
    tenant = one(form, "tenant")
    if secret is None:
        return _sign_in_page(request, "Paste an admin or superadmin API key.", 422)
    try:
        cookie = await run_in_threadpool(_open_session, console, secret, tenant)
    except QuipuError as exc:
        return _sign_in_page(request, f"{exc.message} ({exc.code})", exc.status)
    answer = redirect(request, "/subjects")
    answer.set_cookie(COOKIE, cookie, **cookie_args(request))
    answer.delete_cookie(LOGIN_COOKIE, path=cookie_args(request)["path"])
    return answer


def _open_session(console: Console, secret: str, tenant: str | None) -> str:
    """Check an operator's key; the signed cookie of its new session (audited)."""
    principal = authenticate(console, secret, tenant)
    picked = principal.tenant_id if principal.role.value == "superadmin" else None
    _, digest = console.access.resume(principal.key_id, impersonate=picked, surface="console")
    session = console.signer.begin(principal.key_id, picked)
    console.runtime.service.guard.audit(
        principal,
        "console.sign_in",
        (principal.key_id,),
        details={"tenant": principal.tenant_id, "impersonated": picked is not None},
    )
    return console.signer.cookie(session, digest)


@router.post("/sign-out", include_in_schema=False)
async def sign_out(request: Request) -> Response:
    who, _ = await posted(request)
    console = console_of(request)
    request.state.console_cookie = None  # not re-signed: cleared below
    await run_in_threadpool(
        console.runtime.service.guard.audit,
        who.principal,
        "console.sign_out",
        (who.principal.key_id,),
    )
    answer = redirect(request, "/sign-in")
    answer.delete_cookie(COOKIE, path=cookie_args(request)["path"])
    return answer


@router.get("/tenants", include_in_schema=False)
def tenants(request: Request) -> HTMLResponse:
    who = operator(request)
    found = console_of(request).access.list_tenants() if who.superadmin else []
    return render(request, "tenants.html", {"tenants": found}, who=who)


@router.post("/tenant", include_in_schema=False)
async def pick_tenant(request: Request) -> Response:
    """A superadmin switches the tenant it acts on; audited in the tenant it enters."""
    who, form = await posted(request)
    console = console_of(request)
    if not who.superadmin:
        return back(request, "/tenants", who, "Only a superadmin acts on another tenant.")
    tenant = required(form, "tenant", "a tenant")
    principal, cookie = await run_in_threadpool(_switch_tenant, console, who, tenant)
    request.state.console_cookie = cookie
    return back(request, "/subjects", who, f"Now acting on tenant {principal.tenant_id}.")


def _switch_tenant(console: Console, who: Operator, tenant: str) -> tuple[Principal, str]:
    principal, digest = console.access.resume(
        who.principal.key_id, impersonate=tenant, surface="console"
    )
    moved = replace(who.session, tenant=principal.tenant_id)
    console.runtime.service.guard.audit(
        principal, "console.tenant", (principal.tenant_id,), details={"tenant": tenant}
    )
    return principal, console.signer.cookie(moved, digest)


@router.get("/subjects", include_in_schema=False)
def subjects(
    request: Request,
    cursor: str | None = None,
    after_scope: str | None = None,
    after_owner: str | None = None,
) -> HTMLResponse:
    """The tenant's subjects with their live counts: a superadmin's oversight list (SCOPE-8,
    with each subject's memories), or a tenant admin's (its sessions and erasure)."""
    who = operator(request)
    console = console_of(request)
    rows: list[Any]
    next_cursor = None
    after = None
    if who.superadmin:
        rows, next_cursor = console.runtime.governance.subjects(
            who.principal, cursor=cursor, limit=100
        )
    else:
        start = (after_scope, after_owner) if after_scope and after_owner else None
        rows, after = console.inspection.subjects(who.principal, after=start)
    context = {"subjects": rows, "next_cursor": next_cursor, "after": after}
    return render(request, "subjects.html", context, who=who)


@router.get("/subject", include_in_schema=False)
def subject(
    request: Request,
    scope: str,
    owner: str,
    status: str | None = None,
    kind: str | None = None,
    tag: str | None = None,
    as_of: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    who = operator(request)
    gov = console_of(request).runtime.governance
    started = time.perf_counter()
    page = gov.oversight_list(
        who.principal,
        scope=scope,
        owner=owner,
        cursor=cursor or None,
        limit=50,
        statuses=[status] if status else None,
        kinds=[kind] if kind else None,
        tags=[tag] if tag else None,
        as_of=as_of or None,
    )
    took = (time.perf_counter() - started) * 1000
    context = {
        "scope": scope,
        "owner": owner,
        "page": page,
        "filters": {"status": status, "kind": kind, "tag": tag, "as_of": as_of},
        "statuses": LISTED_STATUSES,
        "kinds": KINDS,
        "took_ms": took,
    }
    return render(request, "subject.html", context, who=who)


@router.get("/search", include_in_schema=False)
def search_form(request: Request) -> HTMLResponse:
    who = operator(request)
    return render(request, "search.html", _search_context(who, {}, None, None), who=who)


@router.post("/search", include_in_schema=False)
async def search(request: Request) -> HTMLResponse:
    """Recall as the signed-in key, in one scope: the API's POST /v1/recall, same rules."""
    who, form = await posted(request)
    query = required(form, "q", "a query")
    scope = one(form, "scope") or "tenant"
    filters: dict[str, Any] = {
        "kinds": form.get("kind") or None,
        "tags": [t.strip() for t in (one(form, "tags") or "").split(",") if t.strip()] or None,
        "statuses": form.get("status") or None,
        "as_of": one(form, "as_of"),
    }
    k = one(form, "k")
    size = None if k is None else validate.bounded_int(_int(k), field="k", low=1, high=100)
    service = console_of(request).runtime.service
    result = await run_in_threadpool(
        lambda: service.recall(who.principal, query, scope=scope, k=size, **filters)
    )
    metrics.observe_recall(result.meta)  # a recall like the API's, in the health page's p50/p95
    curl = _curl(
        request, who.principal.tenant_id if who.superadmin else None, query, scope, size, filters
    )
    return render(request, "search.html", _search_context(who, form, result, curl), who=who)


def searchable(principal: Principal) -> list[str]:
    """The scopes a recall as ``principal`` can search: those its credential resolves (a key
    without a user id has no ``user`` scope; only a superadmin has ``global``)."""
    return [ref.scope.value for ref in _resolved(principal)]


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidInput("k must be a whole number", code="invalid_argument") from None


def _search_context(
    who: Operator, form: dict[str, list[str]], result: Any, curl: str | None
) -> dict[str, Any]:
    return {
        "form": {name: values[-1] for name, values in form.items() if values},
        "chosen": {"kind": set(form.get("kind", [])), "status": set(form.get("status", []))},
        "scopes": searchable(who.principal),
        "kinds": KINDS,
        "statuses": LISTED_STATUSES,
        "result": result,
        "timings": json.dumps((result.meta if result else {}).get("timings", {}), indent=1),
        "curl": curl,
    }


def _curl(
    request: Request,
    tenant: str | None,
    query: str,
    scope: str,
    k: int | None,
    filters: dict[str, Any],
) -> str:
    body: dict[str, Any] = {"query": query, "scope": scope}
    if k is not None:
        body["k"] = k
    body.update({name: value for name, value in filters.items() if value})
    base = str(request.base_url).rstrip("/")
    parts = [
        "curl -s -X POST",
        shlex.quote(f"{base}/v1/recall"),
        '-H "Authorization: Bearer $QUIPU_API_KEY"',
        "-H 'Content-Type: application/json'",
    ]
    if tenant is not None:
        parts.append(shlex.quote(f"X-Quipu-Tenant: {tenant}").join(["-H ", ""]))
    parts.append("-d " + shlex.quote(json.dumps(body, ensure_ascii=False)))
    return " \\\n  ".join(parts)


@router.get("/memories/", include_in_schema=False)
def open_memory(request: Request, id: str = "") -> Response:
    """The "open by id" form: to the memory's page (an id, never memory text, in the URL)."""
    operator(request)
    return redirect(request, f"/memories/{validate.identifier(id.strip(), field='id')}")


@router.get("/memories/{memory_id}", include_in_schema=False)
def memory(request: Request, memory_id: str, as_of: str | None = None) -> HTMLResponse:
    who = operator(request)
    console = console_of(request)
    at = validate.instant(as_of, field="as_of") if as_of else None
    ref, versions = console.inspection.history(who.principal, memory_id)
    current = versions[-1]
    shown = version_at(versions, at)
    rows = []
    for index, version in enumerate(versions):
        before = versions[index - 1] if index else None
        rows.append(
            {
                "v": version,
                "diff": word_diff(before.text if before else "", version.text),
                "changed": changed_fields(before, version),
            }
        )
    rows.reverse()
    holds = [h for h in console.runtime.governance.holds(who.principal) if h.target == current.id]
    usage = console.inspection.usage(who.principal, current.id)
    graph = console.graph.memory_graph(who.principal, current.id)
    context = {
        "ref": ref,
        "current": current,
        "shown": shown,
        "as_of": at,
        "as_of_value": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] if at else "",
        "rows": rows,
        "quote": _quote(current),
        "holds": holds,
        "usage": usage,
        "graph": graph,
        "queued": current.status in (Status.CANDIDATE, Status.QUARANTINED),
        "final": current.status in (Status.ERASED,),
        # offered only where they would work: forget and restore write the memory's own
        # partition (a superadmin forgets any through oversight); erase, hold and review
        # act tenant-wide for every operator
        "can_forget": who.superadmin or ref in own_partitions(who.principal),
        "can_restore": ref in own_partitions(who.principal),
    }
    return render(request, "memory.html", context, who=who)


def own_partitions(principal: Principal) -> set[ScopeRef]:
    """The partitions ``principal`` may write: the scopes its credential resolves and may
    write to (SCOPE-3, SCOPE-5)."""
    found = set()
    for ref in _resolved(principal):
        try:
            check_write(principal, ref)
        except QuipuError:
            continue
        found.add(ref)
    return found


def _resolved(principal: Principal) -> list[ScopeRef]:
    """Each scope's partition for ``principal``, in :class:`Scope` order, leaving out the
    scopes its credential cannot resolve."""
    found = []
    for scope in Scope:
        try:
            found.append(resolve_scope(principal, scope))
        except QuipuError:
            continue
    return found


def _quote(memory: Any) -> dict[str, Any] | None:
    prov = memory.provenance
    if not prov.quote:
        return None
    return {"text": prov.quote, "start": prov.quote_start, "end": prov.quote_end}


@router.get("/health", include_in_schema=False)
def health(request: Request) -> HTMLResponse:
    who = operator(request)
    console = console_of(request)
    service = console.runtime.service
    caps = service.store.capabilities
    started = time.perf_counter()
    now = datetime.now(UTC)
    depth: dict[JobStatus, int] = {}
    oldest: dict[JobStatus, float] = {}
    for status in JobStatus:
        found = console.runtime.queue.store.list_jobs(who.principal.tenant_id, status, HEALTH_JOBS)
        depth[status] = len(found)
        if found and status in (JobStatus.QUEUED, JobStatus.RUNNING):
            oldest[status] = (now - min(j.created_at for j in found)).total_seconds()
    took = (time.perf_counter() - started) * 1000
    context = {
        "backend": caps.backend,
        "vector_search": caps.vector_search,
        "embedder": service.embedder.model_id if service.embedder else None,
        "depth": depth,
        "oldest": oldest,
        "capped": HEALTH_JOBS,
        "recall": metrics.recall_latency(),
        "took_ms": took,
        "now": now,
    }
    return render(request, "health.html", context, who=who)
