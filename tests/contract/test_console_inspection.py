"""What the operator console reads of sessions, subjects and knowledge, on every backend
(issue 29, OPS-4): a tenant's sessions by subject with their turns, promotion jobs and the
memories written in them; the tenant's subjects for a tenant admin; and who is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from quipu.core.records import Principal, Role
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.inspection import Inspection
from quipu.memories import MemoryService
from quipu.sessions import SessionService
from quipu.storage.sqlite.store import SQLiteStore

ADMIN = Principal("t1", "key-admin", Role.ADMIN)
OTHER_ADMIN = Principal("t2", "key-admin2", Role.ADMIN)
NOT_ADMINS = [
    Principal("t1", "key-agent", Role.AGENT, agent_id="alice", user_id="u-alice"),
    Principal("t1", "key-user", Role.USER, user_id="u-alice"),
    Principal("t1", "key-svc", Role.SERVICE),
]
SEP = "\x1f"


def test_ops_4_sessions_by_subject_with_turns_jobs_and_promoted_memories(
    service: MemoryService, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:
    sessions = SessionService(service.store)
    sessions.append(alice, "s-1", "user", "I moved to Lyon last week")
    sessions.append(alice, "s-1", "assistant", "Noted: you live in Lyon")
    sessions.append(alice, "s-2", "user", "Book the usual table")
    sessions.append(bob, "s-1", "user", "Bob's own s-1")
    sessions.append(other_tenant, "s-1", "user", "Another tenant's s-1")
    job, _ = sessions.promote(alice, "s-1")
    made = service.remember(alice, "u-alice lives in Lyon", scope="agent_user", session_id="s-1")
    service.remember(alice, "Unrelated, no session", scope="agent_user")
    service.remember(bob, "Bob's memory of his own s-1", scope="user", session_id="s-1")
    carol = Principal("t1", "key-carol", Role.AGENT, agent_id="carol", user_id="u-alice")
    service.remember(carol, "carol's s-1 with the same user", scope="user", session_id="s-1")
    look = Inspection(service)

    every = look.sessions(ADMIN)
    assert {(s.agent, s.user, s.key.session_id) for s in every} == {
        ("alice", "u-alice", "s-1"),
        ("alice", "u-alice", "s-2"),
        ("bob", "u-bob", "s-1"),
    }
    assert every[0].key.session_id == "s-1" and every[0].agent == "bob"  # newest first
    assert [s.key.session_id for s in look.sessions(ADMIN, scope="user", owner="u-alice")] == [
        "s-2",
        "s-1",
    ]
    assert {s.agent for s in look.sessions(ADMIN, scope="agent", owner="bob")} == {"bob"}
    pair = look.sessions(ADMIN, scope="agent_user", owner=f"alice{SEP}u-alice")
    assert {s.key.session_id for s in pair} == {"s-1", "s-2"}
    assert all(s.turns in (1, 2) for s in pair) and all(s.last_at for s in pair)

    view = look.session(ADMIN, f"alice{SEP}u-alice", "s-1")
    assert [(t.seq, t.role) for t in view.turns] == [(1, "user"), (2, "assistant")]
    assert [j.job_id for j in view.jobs] == [job.job_id]
    assert [m.id for m in view.promoted] == [made.memory.id]  # not bob's nor carol's
    # another tenant's admin, or a session nobody wrote: the one 404 (SCOPE-7)
    with pytest.raises(NotFound):
        Inspection(service).session(OTHER_ADMIN, f"alice{SEP}u-alice", "s-2")
    with pytest.raises(NotFound):
        look.session(ADMIN, f"alice{SEP}u-alice", "s-9")
    for bad in (f"a{SEP}b{SEP}c", "a/b", "", "x\x00"):
        with pytest.raises(InvalidInput):
            look.session(ADMIN, bad, "s-1")
    with pytest.raises(InvalidInput):
        look.sessions(ADMIN, scope="agent_user", owner="alice")
    with pytest.raises(InvalidInput):
        look.sessions(ADMIN, scope="nope", owner="alice")
    actions = [e.action for e in service.store.list_audit("t1", None, 50)]
    assert "session.inspect" in actions


def test_ops_4_a_tenant_admin_lists_its_subjects_and_a_non_admin_is_refused(
    service: MemoryService, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:
    """Issue 29: subjects (agents, users, agent-user pairs) with counts for a tenant admin;
    agent, user and service keys are refused (403), another tenant's subjects never show."""
    service.remember(alice, "u-alice likes tea", scope="user")
    service.remember(alice, "u-alice likes jazz", scope="user")
    service.remember(bob, "bob's note", scope="agent")
    service.remember(other_tenant, "another tenant's user", scope="user")
    look = Inspection(service)
    page, after = look.subjects(ADMIN)
    assert {(s.scope.value, s.owner): s.live for s in page} == {
        ("user", "u-alice"): 2,
        ("agent", "bob"): 1,
    }
    assert after is None
    assert look.subjects(ADMIN, after=("agent", "bob"))[0] == [page[-1]]
    for bad in (("agent", "b\x00ob"), ("nope", "bob"), ("agent", "a/b")):
        with pytest.raises(InvalidInput):
            look.subjects(ADMIN, after=bad)
    assert ("subjects.inspect") in [e.action for e in service.store.list_audit("t1", None, 20)]
    for who in NOT_ADMINS:
        with pytest.raises(Forbidden):
            look.subjects(who)
        with pytest.raises(Forbidden):
            look.sessions(who)
        with pytest.raises(Forbidden):
            look.session(who, f"alice{SEP}u-alice", "s-1")
        with pytest.raises(Forbidden):
            look.articles(who)


def test_ops_4_a_turn_another_tool_wrote_badly_still_reads(tmp_path: Path) -> None:
    """Issue 29 (hostile text; issue 20's rule that reads never 500 on a stored row): a turn
    written around the write boundary as invalid UTF-8 (a lone surrogate's bytes), with a NUL
    and markup, or with a lone-surrogate escape in its metadata, reads with U+FFFD in place,
    so the console's session page (and the API's turns) answer instead of failing. SQLite
    only: PostgreSQL refuses such bytes and NUL in text on write."""
    store = SQLiteStore(tmp_path / "raw.db")
    try:
        writer = Principal("t1", "key-a", Role.AGENT, agent_id="a", user_id="u")
        SessionService(store).append(writer, "s-raw", "user", "first")
        SessionService(store).append(writer, "s-raw", "user", "second")
        with sqlite3.connect(tmp_path / "raw.db") as raw:
            raw.execute(
                "UPDATE session_turns SET content = CAST(X'61EDA08062' AS TEXT) WHERE seq = 1"
            )
            raw.execute(
                "UPDATE session_turns SET content = ?, metadata = ? WHERE seq = 2",
                ("nul\x00<script>x</script>", '{"k": "\\ud800"}'),
            )
        view = Inspection(MemoryService(store, None)).session(ADMIN, f"a{SEP}u", "s-raw")
        assert [t.content for t in view.turns] == [
            "a\ufffd\ufffd\ufffdb",
            "nul\x00<script>x</script>",
        ]
        assert view.turns[1].metadata == {"k": "\ufffd"}
    finally:
        store.close()
