"""Erase, legal holds and subject erasure on every backend (issue 22; LIFE-4, SAFE-4).

Each refusal changes nothing; each act is audited with who, why, role, agent and user, and the
audit log never holds the erased content."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal, Relation, Role, Status
from quipu.core.scopes import resolve_scope
from quipu.errors import Conflict, Forbidden, InvalidInput, NotFound
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.governance import GovernanceService
from quipu.memories import MemoryService

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
ERASER = Principal("t1", "key-dpo", Role.AGENT, agent_id="dpo", grants=frozenset({"memory:erase"}))
OTHER_ADMIN = Principal("t2", "key-admin-2", Role.ADMIN, agent_id="ops")


@pytest.fixture
def gov(service: MemoryService) -> GovernanceService:
    return GovernanceService(service)


def _dump(service: MemoryService, who: Principal) -> str:
    return json.dumps([m.to_dict() for m, _ in service.export(who)])


def _audit_text(gov: GovernanceService) -> str:
    events, _ = gov.audit(ADMIN, limit=200)
    return json.dumps([e.to_dict() for e in events])


def test_life_004_erase_leaves_only_a_tombstone_in_history_export_and_audit(
    service: MemoryService, gov: GovernanceService, alice: Principal
) -> None:
    m = service.remember(
        alice,
        "Quillon Varga keeps a spare key under the blue planter",
        tags=["quillontag"],
        metadata={"note": "quillonmeta"},
        aliases=["quillon alias"],
        quote="quillon quote",
        session_id="s1",
    ).memory
    service.revise(alice, m.id, "Quillon Varga moved the key", reason="quillon reason")
    kept = service.remember(alice, "Dana prefers window seats").memory
    erased = gov.erase(ADMIN, m.id, reason="GDPR art. 17 request 42")
    assert erased.report.families == [m.id]
    assert erased.report.counts["memory_versions"] == 2
    assert erased.report.counts["audit_log"] >= 1  # the revise reason's line
    tomb = erased.tombstone
    assert (tomb.status, tomb.relation, tomb.version) == (Status.ERASED, Relation.ERASES, 3)
    assert tomb.reason == "GDPR art. 17 request 42" and tomb.actor == "key-admin"
    assert tomb.content_hash == service.history(alice, m.id)[1].content_hash
    history = service.history(alice, m.id)
    assert [v.version for v in history] == [1, 2, 3]
    for version in history:
        assert version.text == "" and version.tags == () and version.aliases == ()
        assert version.metadata == {} and version.provenance.quote is None
        assert version.embedding_model is None
    assert history[1].reason is None
    with pytest.raises(NotFound):
        service.get(alice, m.id)
    assert [x.id for x in service.list(alice).items] == [kept.id]
    assert not [h for h in service.recall(alice, "Quillon spare key") if h.memory.id == m.id]
    assert "quillon" not in _dump(service, alice).lower()
    assert any(
        row["status"] == "erased" and row["id"] == m.id for row in json.loads(_dump(service, alice))
    )
    audit = _audit_text(gov)
    assert "quillon" not in audit.lower()
    events, _ = gov.audit(ADMIN)
    (act,) = [e for e in events if e.action == "memory.erase"]
    assert act.reason == "GDPR art. 17 request 42" and act.role == "admin"
    assert act.agent_id == "ops" and act.target_ids == (m.id,)
    # the erased family can never change again, nor be erased twice
    with pytest.raises(Conflict) as again:
        gov.erase(ADMIN, m.id, reason="again")
    assert again.value.code == "illegal_transition"
    with pytest.raises((Conflict, NotFound)):
        service.revise(alice, m.id, "back again")


def test_life_004_erase_needs_an_admin_or_the_erase_grant(
    service: MemoryService, gov: GovernanceService, alice: Principal
) -> None:
    m = service.remember(alice, "Ravi likes green tea").memory
    with pytest.raises(Forbidden):
        gov.erase(alice, m.id, reason="mine")
    assert service.get(alice, m.id).text == "Ravi likes green tea"
    assert gov.erase(ERASER, m.id, reason="request 7").tombstone.status is Status.ERASED


def test_life_004_erase_of_a_foreign_or_missing_id_is_404(
    service: MemoryService, gov: GovernanceService, alice: Principal
) -> None:
    m = service.remember(alice, "Ravi likes green tea").memory
    for ident in (m.id, "0" * 32):
        with pytest.raises(NotFound):
            gov.erase(OTHER_ADMIN, ident, reason="x")
    with pytest.raises(NotFound):
        gov.erase(ADMIN, "0" * 32, reason="x")
    assert service.get(alice, m.id).text == "Ravi likes green tea"


@pytest.mark.parametrize("reason", [None, "", "   ", "a\x00b", "x\ud800", "r" * 1001, 7])
def test_life_004_erase_needs_a_clean_reason(
    service: MemoryService, gov: GovernanceService, alice: Principal, reason: Any
) -> None:
    m = service.remember(alice, "Ravi likes green tea").memory
    with pytest.raises(InvalidInput) as err:
        gov.erase(ADMIN, m.id, reason=reason)
    assert err.value.status == 422
    assert err.value.code in ("reason_required", "invalid_reason", "invalid_text")
    assert service.get(alice, m.id).version == 1


@pytest.mark.parametrize("kind", ["memory", "subject", "tenant"])
def test_life_004_a_legal_hold_refuses_erase_and_changes_nothing(
    service: MemoryService, gov: GovernanceService, alice: Principal, kind: str
) -> None:
    m = service.remember(alice, "Mina takes the 8:10 train", scope="user").memory
    target = {"memory": m.id, "subject": "u-alice", "tenant": None}[kind]
    hold = gov.hold(ADMIN, kind, target, reason="litigation 2026-17")
    before = [v.to_dict() for v in service.history(alice, m.id)]
    with pytest.raises(Conflict) as err:
        gov.erase(ADMIN, m.id, reason="user asked")
    assert err.value.status == 409 and err.value.code == "legal_hold"
    assert err.value.details["holds"] == [hold.hold_id]
    assert [v.to_dict() for v in service.history(alice, m.id)] == before
    if kind != "memory":
        with pytest.raises(Conflict) as subject:
            gov.erase_subject(ADMIN, "u-alice", reason="user asked")
        assert subject.value.code == "legal_hold"
    assert [h.hold_id for h in gov.holds(ADMIN)] == [hold.hold_id]
    released = gov.release_hold(ADMIN, hold.hold_id, reason="case closed")
    assert not released.active and released.release_reason == "case closed"
    assert gov.holds(ADMIN) == [] and len(gov.holds(ADMIN, include_released=True)) == 1
    assert gov.erase(ADMIN, m.id, reason="user asked").tombstone.status is Status.ERASED
    events, _ = gov.audit(ADMIN)
    actions = {e.action: e for e in events}
    assert actions["hold.set"].reason == "litigation 2026-17"
    assert actions["hold.release"].reason == "case closed"


def test_life_004_holds_are_for_admins_and_checked(
    service: MemoryService, gov: GovernanceService, alice: Principal
) -> None:
    m = service.remember(alice, "Ravi likes green tea").memory
    with pytest.raises(Forbidden):
        gov.hold(alice, "memory", m.id, reason="x")
    with pytest.raises(Forbidden):
        gov.hold(ERASER, "memory", m.id, reason="x")  # an eraser cannot hold or lift
    with pytest.raises(NotFound):
        gov.hold(ADMIN, "memory", "f" * 32, reason="x")
    with pytest.raises(NotFound):
        gov.hold(OTHER_ADMIN, "memory", m.id, reason="x")
    with pytest.raises(InvalidInput):
        gov.hold(ADMIN, "tenant", "t2", reason="x")
    with pytest.raises(InvalidInput):
        gov.hold(ADMIN, "planet", "x", reason="x")
    with pytest.raises(InvalidInput):
        gov.hold(ADMIN, "subject", "u/alice", reason="x")
    with pytest.raises(NotFound):
        gov.release_hold(ADMIN, "nohold", reason="x")
    hold = gov.hold(ADMIN, "memory", m.id, reason="x")
    with pytest.raises(NotFound):
        gov.release_hold(OTHER_ADMIN, hold.hold_id, reason="x")
    assert gov.holds(ADMIN)[0].active


def _runtime(service: MemoryService) -> Any:
    settings = load_settings({"database": "unused.db"}, environ={})
    return build_runtime(settings, service, extractor=DeterministicExtractor())


def test_life_004_subject_erasure_is_a_job_with_progress_and_counts(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    rt = _runtime(service)
    alice2 = replace(alice, key_id="key-alice-2", agent_id="alice2")  # another agent, same user
    carol = Principal("t1", "key-carol", Role.AGENT, agent_id="carol", user_id="u-carol")
    mine = [
        service.remember(alice, "Tomasz Quell lives in Gdansk", scope="user").memory,
        service.remember(alice, "Tomasz Quell likes herring", scope="agent_user").memory,
        service.remember(alice2, "Tomasz Quell drives a red Fiat", scope="agent_user").memory,
    ]
    service.revise(alice, mine[0].id, "Tomasz Quell lives in Sopot", reason="moved")
    agents_own = service.remember(alice, "The deploy runs at 09:00").memory  # agent scope
    others = [
        service.remember(carol, "Carol likes chess", scope="user").memory,
        service.remember(bob, "Bob likes tea", scope="agent_user").memory,
    ]
    for turn in ("I am Tomasz Quell", "My phone ends in 4411"):
        rt.sessions.append(alice, "s-tq", "user", turn)
    rt.sessions.append(carol, "s-c", "user", "hello from Carol")
    job, created = rt.governance.erase_subject(ADMIN, "u-alice", reason="art. 17 request 9")
    assert created and job.kind == "erase_subject" and job.status.value == "queued"
    again, created_again = rt.governance.erase_subject(ADMIN, "u-alice", reason="again")
    assert again.job_id == job.job_id and not created_again
    assert rt.worker.drain() == 1
    done = rt.governance.erasure_job(ADMIN, job.job_id)
    assert done.status.value == "succeeded", done.last_error
    assert done.result["families"] == 3
    counts = done.result["counts"]
    assert counts["memory_versions"] == 4 and counts["tombstones"] == 3
    assert counts["session_turns"] == 2 and counts["sessions"] == 1
    assert done.checkpoint["stage"] == "sessions"
    for m in mine:
        history = service.store.history(service.store.locate("t1", m.id), m.id)  # type: ignore[arg-type]
        assert history[-1].status is Status.ERASED and all(v.text == "" for v in history)
    assert service.get(alice, agents_own.id).text == "The deploy runs at 09:00"
    assert service.get(carol, others[0].id).text == "Carol likes chess"
    assert service.get(bob, others[1].id).text == "Bob likes tea"
    assert rt.sessions.history(alice, "s-tq") == []
    assert [t.content for t in rt.sessions.history(carol, "s-c")] == ["hello from Carol"]
    exported = _dump(service, alice)
    assert "Quell" not in exported and "4411" not in exported
    events, _ = rt.governance.audit(ADMIN, limit=200)
    assert "Quell" not in json.dumps([e.to_dict() for e in events])
    final = [e for e in events if e.action == "subject.erase"]
    assert len(final) == 1 and final[0].details["counts"] == counts
    assert final[0].reason == "art. 17 request 9" and final[0].role == "admin"
    with pytest.raises(NotFound):
        rt.governance.erasure_job(OTHER_ADMIN, job.job_id)
    rt.close()


def test_life_004_subject_erasure_is_refused_under_a_hold_on_one_of_its_memories(
    service: MemoryService, alice: Principal
) -> None:
    rt = _runtime(service)
    m = service.remember(alice, "Mina takes the 8:10 train", scope="user").memory
    rt.governance.hold(ADMIN, "memory", m.id, reason="evidence")
    with pytest.raises(Conflict) as err:
        rt.governance.erase_subject(ADMIN, "u-alice", reason="asked")
    assert err.value.code == "legal_hold"
    assert rt.queue.store.list_jobs("t1", None, 10) == []
    with pytest.raises(Forbidden):
        rt.governance.erase_subject(alice, "u-alice", reason="asked")
    with pytest.raises(InvalidInput):
        rt.governance.erase_subject(ADMIN, "u\x1falice", reason="asked")
    rt.close()


def test_life_004_a_hold_set_while_the_job_waits_stops_it_unchanged(
    service: MemoryService, alice: Principal
) -> None:
    rt = _runtime(service)
    m = service.remember(alice, "Mina takes the 8:10 train", scope="user").memory
    job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="asked")
    rt.governance.hold(ADMIN, "subject", "u-alice", reason="court order")
    rt.worker.drain()
    failed = rt.governance.erasure_job(ADMIN, job.job_id)
    assert failed.status.value == "failed" and "legal_hold" in (failed.last_error or "")
    assert service.get(alice, m.id, scope="user").text == "Mina takes the 8:10 train"
    rt.close()


def test_safe_004_session_writes_and_job_control_are_audited(
    service: MemoryService, alice: Principal
) -> None:
    rt = _runtime(service)
    rt.sessions.append(alice, "s1", "user", "I live in Porto and work at Farfetch.")
    rt.sessions.append(alice, "s1", "user", "I prefer aisle seats on long flights.")
    job, _ = rt.sessions.promote(alice, "s1")
    rt.governance.job_cancel(ADMIN, job.job_id)
    rt.governance.job_retry(ADMIN, job.job_id)
    with pytest.raises(Forbidden):
        rt.governance.job_cancel(alice, job.job_id)
    with pytest.raises(NotFound):
        rt.governance.job_cancel(OTHER_ADMIN, job.job_id)
    events, _ = rt.governance.audit(ADMIN)
    by_action: dict[str, list[Any]] = {}
    for e in events:
        by_action.setdefault(e.action, []).append(e)
    assert len(by_action["session.append"]) == 2
    append = by_action["session.append"][0]
    assert (append.role, append.agent_id, append.user_id) == ("agent", "alice", "u-alice")
    assert "Porto" not in json.dumps(append.to_dict())
    assert by_action["session.promote"][0].details["job_id"] == job.job_id
    assert by_action["job.cancel"][0].target_ids == (job.job_id,)
    assert by_action["job.retry"][0].actor_key == "key-admin"
    rt.close()


def test_life_004_erase_refreshes_recall_in_every_path(
    service: MemoryService, gov: GovernanceService, alice: Principal
) -> None:
    """After an erase, neither the keyword index nor the vectors still find the text (the
    in-process SQLite index is dropped; PostgreSQL's terms and vectors are cleared)."""
    m = service.remember(alice, "Zorblax quantum lighthouse procedure").memory
    service.remember(alice, "Dana prefers window seats")
    assert [h.memory.id for h in service.recall(alice, "Zorblax lighthouse")][:1] == [m.id]
    gov.erase(ADMIN, m.id, reason="request")
    assert m.id not in [h.memory.id for h in service.recall(alice, "Zorblax lighthouse")]
    ref = resolve_scope(alice, "agent")
    found, _ = service.store.text_candidates(ref, "Zorblax lighthouse", service.guard.filters(), 10)
    loaded = service.store.load([c.key for c in found])
    assert all(v.id != m.id for v in loaded.values())
