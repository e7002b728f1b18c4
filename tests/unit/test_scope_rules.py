"""Who may write where and who reviews (SCOPE-3, SCOPE-5, LIFE-6), for every role and scope:
the whole table, so a check that lets one more role or scope through fails here (mutants of
core/scopes.py that the narrower tests let live)."""

from __future__ import annotations

import pytest

from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.core.scopes import GLOBAL_TENANT, check_write, is_reviewer, resolve_scope
from quipu.errors import Forbidden


def _who(role: Role, grants: frozenset[str] = frozenset()) -> Principal:
    return Principal("t1", "k1", role, agent_id="a1", user_id="u1", grants=grants)


def _may_write(who: Principal, scope: Scope) -> bool:
    ref = (
        ScopeRef(GLOBAL_TENANT, scope, GLOBAL_TENANT)
        if scope is Scope.GLOBAL
        else ScopeRef("t1", scope, "x")
    )
    try:
        check_write(who, ref)
    except Forbidden:
        return False
    return True


@pytest.mark.parametrize("role", list(Role))
def test_scope_005_write_table_for_every_role_and_scope(role: Role) -> None:
    who = _who(role)
    admin = role in (Role.ADMIN, Role.SUPERADMIN)
    assert {s: _may_write(who, s) for s in Scope} == {
        Scope.AGENT: True,
        Scope.USER: True,
        Scope.AGENT_USER: True,
        Scope.TENANT: admin,
        Scope.GLOBAL: role is Role.SUPERADMIN,
    }
    granted = _who(role, frozenset({"tenant:write"}))
    assert _may_write(granted, Scope.TENANT)
    assert _may_write(granted, Scope.GLOBAL) is (role is Role.SUPERADMIN)


@pytest.mark.parametrize("role", list(Role))
def test_scope_003_only_a_superadmin_resolves_the_global_scope(role: Role) -> None:
    if role is Role.SUPERADMIN:
        assert resolve_scope(_who(role), "global") == ScopeRef(
            GLOBAL_TENANT, Scope.GLOBAL, GLOBAL_TENANT
        )
    else:
        with pytest.raises(Forbidden):
            resolve_scope(_who(role), "global")


@pytest.mark.parametrize("role", list(Role))
def test_life_006_reviewers_are_admins_or_hold_the_grant(role: Role) -> None:
    admin = role in (Role.ADMIN, Role.SUPERADMIN)
    assert is_reviewer(_who(role)) is admin
    assert is_reviewer(_who(role, frozenset({"memory:review"})))
