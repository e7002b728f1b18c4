"""Scope owners, derived from the principal alone (SCOPE-3, SCOPE-5). Pure."""

from __future__ import annotations

from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.errors import Forbidden, InvalidInput

GLOBAL_TENANT = "__global__"
TENANT_WRITE_GRANT = "tenant:write"
#: Lets a non-admin key release memories from quarantine (LIFE-6) and review model output.
REVIEW_GRANT = "memory:review"


def parse_scope(value: str | Scope) -> Scope:
    try:
        return Scope(value)
    except ValueError:
        allowed = ", ".join(s.value for s in Scope)
        raise InvalidInput(
            f"unknown scope {value!r}; expected one of {allowed}",
            code="invalid_scope",
            details={"scope": str(value)},
        ) from None


def resolve_scope(principal: Principal, scope: str | Scope) -> ScopeRef:
    """The partition a request may touch. Never null-owned: 422 ``subject_unresolvable``."""
    scope = parse_scope(scope)
    if scope is Scope.AGENT:
        owner = principal.agent_id or principal.key_id
    elif scope is Scope.USER:
        owner = _required(principal.user_id, scope, "user_id")
    elif scope is Scope.AGENT_USER:
        agent = _required(principal.agent_id, scope, "agent_id")
        user = _required(principal.user_id, scope, "user_id")
        owner = f"{agent}\x1f{user}"
    elif scope is Scope.TENANT:
        owner = principal.tenant_id
    else:
        if principal.role is not Role.SUPERADMIN:
            raise Forbidden("the global scope is for superadmins only", code="scope_forbidden")
        return ScopeRef(GLOBAL_TENANT, Scope.GLOBAL, GLOBAL_TENANT)
    return ScopeRef(principal.tenant_id, scope, owner)


def check_write(principal: Principal, ref: ScopeRef) -> None:
    """Writing to the tenant scope needs a grant; global needs superadmin (SCOPE-5)."""
    if ref.scope is Scope.TENANT and not (
        TENANT_WRITE_GRANT in principal.grants or principal.role in (Role.ADMIN, Role.SUPERADMIN)
    ):
        raise Forbidden(
            "writing to the tenant scope needs a tenant:write grant", code="scope_forbidden"
        )
    if ref.scope is Scope.GLOBAL and principal.role is not Role.SUPERADMIN:
        raise Forbidden("the global scope is for superadmins only", code="scope_forbidden")


def _required(value: str | None, scope: Scope, what: str) -> str:
    if not value:
        raise InvalidInput(
            f"scope {scope.value!r} needs a {what} on the credential, and this one has none",
            code="subject_unresolvable",
            details={"scope": scope.value, "missing": what},
        )
    return value


def is_reviewer(principal: Principal) -> bool:
    """Whether the principal may release quarantined memories: an admin, a superadmin, or a key
    holding the ``memory:review`` grant. A writer never reviews its own writes by default."""
    return principal.role in (Role.ADMIN, Role.SUPERADMIN) or REVIEW_GRANT in principal.grants
