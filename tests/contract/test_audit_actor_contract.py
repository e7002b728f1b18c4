"""The audit line of every memory write names who acted: the acting key, its role, the agent and
end user it acts as, and the surface it came through (SAFE-4; issue 22 "audit rows carry role,
agent and user ids"). The store writes that line in the version's own transaction, so these run
on every backend: SQLite, PostgreSQL and the Citus write path."""

from __future__ import annotations

from dataclasses import replace

import pytest

from quipu.auth.access import Access
from quipu.core.auth import AuditEvent
from quipu.core.records import Principal, Role
from quipu.governance import GovernanceService
from quipu.memories import MemoryService

#: Two keys writing to one end user's memory, through different surfaces and roles.
PLANNER = Principal("t1", "key-planner", Role.AGENT, agent_id="planner", user_id="u1")
COACH = Principal("t1", "key-coach", Role.SERVICE, agent_id="coach", user_id="u1", surface="mcp")
REVIEWER = Principal(
    "t1",
    "key-rev",
    Role.AGENT,
    agent_id="rev",
    user_id="u-rev",
    grants=frozenset({"memory:review"}),
    surface="http",
)
ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops", user_id="u-ops", surface="cli")
ROOT = Principal("t1", "key-root", Role.SUPERADMIN, agent_id="root", surface="http")


def _writes(service: MemoryService) -> list[AuditEvent]:
    """The audit lines the store wrote with versions (``memory.<relation>``), oldest first."""
    events = service.store.list_audit("t1", None, 1000)
    relations = {
        "created", "revises", "superseded_by", "supersedes", "status", "forgets", "restores",
        "merges", "reviews", "judges", "erases",
    }  # fmt: skip
    return [e for e in reversed(events) if e.action.removeprefix("memory.") in relations]


def _assert_by(event: AuditEvent, who: Principal) -> None:
    got = (event.actor_key, event.role, event.agent_id, event.user_id, event.surface)
    wanted = (who.key_id, who.role.value, who.agent_id, who.user_id, who.surface)
    assert got == wanted, (event.action, got, wanted)


def test_safe_004_every_memory_write_audits_its_actor(service: MemoryService) -> None:
    """Remember, revise by another key, a status move, supersede and forget: each audit line
    carries the acting principal, not the creator's agent id and surface."""
    first = service.remember(PLANNER, "Mira's train leaves at 7:40", scope="user").memory
    revised = service.revise(
        COACH, first.id, "Mira's train leaves at 7:55", expected_version=1, reason="new timetable"
    )
    assert revised.provenance.agent_id == "planner"  # provenance stays the creator's
    service.set_status(COACH, first.id, "stale", reason="timetable may change")
    newer = service.remember(COACH, "Mira now takes the 8:10 bus", scope="user").memory
    service.supersede(PLANNER, first.id, newer.id, reason="moved to the bus")
    service.forget(COACH, newer.id, reason="asked to")
    lines = [(e.action, e.target_ids[0]) for e in _writes(service)]
    assert lines == [
        ("memory.created", first.id),
        ("memory.revises", first.id),
        ("memory.status", first.id),
        ("memory.created", newer.id),
        ("memory.superseded_by", first.id),
        ("memory.supersedes", newer.id),
        ("memory.forgets", newer.id),
    ]
    acting = [PLANNER, COACH, COACH, COACH, PLANNER, PLANNER, COACH]
    for event, who in zip(_writes(service), acting, strict=True):
        _assert_by(event, who)


def test_safe_004_governance_writes_audit_their_actor(service: MemoryService) -> None:
    """Review, judgement, restore, merge, oversight forget and erase write versions (the erase a
    tombstone); each version's audit line names the reviewer, judge, restorer or eraser."""
    gov = GovernanceService(service)
    candidate = service.remember(
        PLANNER, "Mira is allergic to peanuts", scope="user", status="candidate"
    ).memory
    gov.review(REVIEWER, candidate.id, "activate", reason="confirmed", expected_version=1)
    gov.affirm(REVIEWER, candidate.id, reason="checked again", expected_version=2)
    service.revise(PLANNER, candidate.id, "Mira is allergic to tree nuts", expected_version=3)
    gov.restore(COACH, candidate.id, 1, reason="the doctor said peanuts", expected_version=4)
    dup = service.remember(PLANNER, "Mira: peanut allergy", scope="user").memory
    gov.merge(COACH, [candidate.id, dup.id], "Mira has a peanut allergy", reason="duplicates")
    other = service.remember(PLANNER, "Mira likes the aisle seat", scope="user").memory
    gov.oversight_forget(ROOT, other.id, reason="operator request")
    gov.erase(ADMIN, candidate.id, reason="subject request 42")
    expected = [
        ("memory.created", PLANNER),
        ("memory.reviews", REVIEWER),
        ("memory.judges", REVIEWER),
        ("memory.revises", PLANNER),
        ("memory.restores", COACH),
        ("memory.created", PLANNER),
        ("memory.merges", COACH),
        ("memory.superseded_by", COACH),
        ("memory.created", PLANNER),
        ("memory.forgets", ROOT),
        ("memory.erases", ADMIN),
    ]
    events = _writes(service)
    assert [e.action for e in events] == [a for a, _ in expected]
    for event, (_, who) in zip(events, expected, strict=True):
        _assert_by(event, who)


def test_safe_004_a_run_token_is_audited_as_its_own_subject(service: MemoryService) -> None:
    """A run token minted by a service key writes as its (agent, user): the audit line names
    the token's key and subject, not its parent's."""
    token = Principal(
        "t1", "key-run", Role.AGENT, agent_id="planner", user_id="u2", parent_key_id="key-svc"
    )
    written = service.remember(token, "u2 prefers tea", scope="agent_user").memory
    service.forget(replace(token, surface="http"), written.id, reason="done")
    created, forgot = _writes(service)
    _assert_by(created, token)
    _assert_by(forgot, replace(token, surface="http"))


@pytest.mark.parametrize("surface", ["library", "http", "mcp", "cli"])
def test_safe_004_the_surface_is_the_actors(service: MemoryService, surface: str) -> None:
    first = service.remember(PLANNER, "Mira reads on the train", scope="user").memory
    service.forget(replace(COACH, surface=surface), first.id)
    assert _writes(service)[-1].surface == surface


def test_safe_004_minting_a_run_token_audits_the_service_key(service: MemoryService) -> None:
    """``token.mint`` names the minting service key with its role, agent and user (it named the
    key alone); the token's own subject stays in the details."""
    access = Access(service.store)
    access.create_tenant("t1")
    minter = replace(COACH, surface="http")
    credential, _ = access.mint_run_token(minter, "planner", "u9")
    mint = [e for e in service.store.list_audit("t1", None, 100) if e.action == "token.mint"]
    assert [e.target_ids for e in mint] == [(credential.key_id,)]
    _assert_by(mint[0], minter)
    assert (mint[0].details["agent_id"], mint[0].details["user_id"]) == ("planner", "u9")
