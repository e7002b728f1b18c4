"""What every console page shares: the signed-in operator, forms with their CSRF token, and
rendering. Pages call the same use cases as the API (MemoryService, GovernanceService, the job
queue, the audit log), so isolation and audit are the API's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from quipu.auth.access import Access
from quipu.core.records import Principal, Role
from quipu.errors import Forbidden, InvalidInput, PayloadTooLarge, QuipuError
from quipu.graph.inspection import GraphInspection
from quipu.inspection import Inspection
from quipu.knowledge import KnowledgeService
from quipu.runtime import Runtime
from quipu.surfaces.console.sessions import ConsoleSession, SessionSigner, same_token

HERE = Path(__file__).parent
COOKIE = "quipu_console"
#: The one-time notice of the last act, shown on the page it redirects to.
NOTICE_COOKIE = "quipu_console_notice"
#: The sign-in form's own CSRF cookie (double submit), before any session exists.
LOGIN_COOKIE = "quipu_console_login"
#: A console form is small: a reason, a query, a few filters.
MAX_FORM_BYTES = 65_536
MAX_FORM_FIELDS = 64
OPERATOR_ROLES = (Role.ADMIN, Role.SUPERADMIN)
#: Sent with every console answer: no script runs, nothing is framed, nothing is cached.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class SignInNeeded(Exception):
    """No live session: a page redirects to the sign-in form."""


class CsrfRefused(Forbidden):
    """A form posted without this session's CSRF token."""

    default_code = "csrf_refused"


@dataclass
class Console:
    """The console's parts: the runtime's use cases, key checks and the sign-in sessions."""

    runtime: Runtime
    access: Access
    signer: SessionSigner
    inspection: Inspection
    templates: Environment
    knowledge: KnowledgeService
    graph: GraphInspection


def build_console_state(runtime: Runtime, access: Access, signer: SessionSigner) -> Console:
    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return Console(
        runtime,
        access,
        signer,
        Inspection(runtime.service),
        templates,
        KnowledgeService(runtime.service),
        GraphInspection(runtime.service),
    )


def console_of(request: Request) -> Console:
    found: Console = request.app.state.console
    return found


@dataclass
class Operator:
    """The signed-in operator of one request: the session, the principal its key resolves to
    now (a revoked key fails here, on every request) and the session's CSRF token."""

    session: ConsoleSession
    principal: Principal
    csrf: str
    digest: str

    @property
    def superadmin(self) -> bool:
        return self.principal.role is Role.SUPERADMIN


def operator(request: Request) -> Operator:
    """The signed-in operator, or :class:`SignInNeeded`; the answer re-signs the cookie with
    this request's time (the idle clock restarts)."""
    console = console_of(request)
    claimed = SessionSigner.unverified(request.cookies.get(COOKIE))
    if claimed is None:
        raise SignInNeeded
    session, body, mac = claimed
    try:
        principal, digest = console.access.resume(
            session.key_id, impersonate=session.tenant, surface="console"
        )
    except QuipuError:
        raise SignInNeeded from None
    if principal.role not in OPERATOR_ROLES or not console.signer.verify(
        session, body, mac, digest
    ):
        raise SignInNeeded
    fresh = console.signer.touched(session)
    request.state.console_cookie = console.signer.cookie(fresh, digest)
    return Operator(fresh, principal, SessionSigner.csrf(fresh, digest), digest)


def authenticate(console: Console, secret: str, tenant: str | None) -> Principal:
    """The principal of an operator's key: admin or superadmin only (403 otherwise)."""
    principal = console.access.authenticate(secret, impersonate=tenant, surface="console")
    if principal.role not in OPERATOR_ROLES:
        raise Forbidden(
            "the console is for admin and superadmin keys; agent, user and service keys use "
            "the API",
            code="console_forbidden",
        )
    return principal


async def read_form(request: Request) -> dict[str, list[str]]:
    """An ``application/x-www-form-urlencoded`` body, bounded; every value valid UTF-8."""
    if request.headers.get("content-type", "").split(";")[0].strip() != (
        "application/x-www-form-urlencoded"
    ):
        raise InvalidInput("console forms are sent url-encoded", code="invalid_form")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PayloadTooLarge(f"a console form is at most {MAX_FORM_BYTES} bytes")
    try:
        pairs = parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            max_num_fields=MAX_FORM_FIELDS,
            encoding="utf-8",
            errors="strict",
        )
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput("the form is not valid url-encoded UTF-8", code="invalid_form") from None
    found: dict[str, list[str]] = {}
    for name, value in pairs:
        found.setdefault(name, []).append(value)
    return found


def one(form: dict[str, list[str]], name: str) -> str | None:
    """A form field's value with surrounding whitespace removed; None when absent or blank."""
    values = form.get(name)
    if not values:
        return None
    value = values[-1].strip()
    return value or None


async def posted(request: Request) -> tuple[Operator, dict[str, list[str]]]:
    """The operator and the form of a POST, after its CSRF token is checked (403). The key's
    check reads the store, so it runs on the worker pool, not the event loop."""
    who = await run_in_threadpool(operator, request)
    form = await read_form(request)
    if not same_token(who.csrf, one(form, "csrf")):
        raise CsrfRefused("the form's CSRF token is missing or wrong: reload the page")
    return who, form


def required(form: dict[str, list[str]], name: str, what: str) -> str:
    value = one(form, name)
    if value is None:
        raise InvalidInput(f"{what} is required", code=f"{name}_required", details={"field": name})
    return value


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    who: Operator | None = None,
    status: int = 200,
) -> HTMLResponse:
    console = console_of(request)
    notice = request.cookies.get(NOTICE_COOKIE)
    notices = [unquote(notice)[:500]] if notice and who is not None else []
    page = console.templates.get_template(template).render(
        base=request.scope.get("root_path", ""),
        who=who,
        notices=notices,
        **context,
    )
    answer = HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)
    if notice:
        answer.delete_cookie(NOTICE_COOKIE, path=cookie_args(request)["path"])
    return answer


def back(request: Request, path: str, who: Operator, notice: str) -> RedirectResponse:
    """Post/redirect/get: the notice is shown once on the page ``path`` (under the console)."""
    del who  # the notice is the operator's own, on its next page
    answer = redirect(request, path)
    answer.set_cookie(NOTICE_COOKIE, quote(notice[:500]), max_age=60, **cookie_args(request))
    return answer


def redirect(request: Request, path: str) -> RedirectResponse:
    base = request.scope.get("root_path", "")
    return RedirectResponse(f"{base}{path}", status_code=303, headers=SECURITY_HEADERS)


def cookie_args(request: Request) -> dict[str, Any]:
    """HttpOnly, SameSite=Strict, scoped to the console, Secure over HTTPS."""
    return {
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
        "path": request.scope.get("root_path", "") or "/",
    }
