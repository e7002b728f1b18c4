"""Session tier, durable jobs and promotion through real stores (SESSION, JOB, PROMO)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.jobs import JobStatus, NewJob
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role, Source
from quipu.errors import InvalidInput, LimitExceeded
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.jobs.queue import JobQueue, Lease, LeaseLost
from quipu.jobs.worker import Periodic, Retryable, Worker
from quipu.memories import MemoryService
from quipu.sessions import SessionConfig, SessionService

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def _runtime(make_store, local_embedder, quota: int = 10_000):  # type: ignore[no-untyped-def]
    s = load_settings({"database": "unused.db"}, environ={})
    service = MemoryService(make_store(), local_embedder, Limits(quota_per_owner=quota))
    return build_runtime(s, service, extractor=DeterministicExtractor())


# -- SESSION ----------------------------------------------------------------------------------


def test_session_001_turns_are_ordered_bounded_and_expire(make_store, alice: Principal) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    sessions = SessionService(make_store(), SessionConfig(ttl=timedelta(hours=1)), clock)
    for i in range(5):
        sessions.append(alice, "s1", "user" if i % 2 == 0 else "assistant", f"turn {i}")
    turns = sessions.history(alice, "s1")
    assert [t.seq for t in turns] == [1, 2, 3, 4, 5] and next(t.content for t in turns) == "turn 0"
    assert turns[0].expires_at == NOW + timedelta(hours=1)
    assert [t.seq for t in sessions.history(alice, "s1", after=3)] == [4, 5]
    with pytest.raises(InvalidInput) as err:
        sessions.append(alice, "s1", "narrator", "x")
    assert err.value.code == "invalid_role"
    with pytest.raises(InvalidInput) as err:
        sessions.append(alice, "s1", "user", "x" * (100 * 1024 + 1))
    assert err.value.code == "text_too_long"
    with pytest.raises(InvalidInput) as err:
        sessions.append(
            alice, "s1", "user", "my key is sk-ant-abcdefghijklmnopqrstuvwxyz0123456789"
        )
    assert err.value.code == "secret_detected"
    with pytest.raises(InvalidInput):
        sessions.append(alice, "s1", "user", "x", expires_at=NOW - timedelta(seconds=1))
    # SESSION-2: expired turns vanish from reads, and pruning deletes them
    clock.at = NOW + timedelta(hours=2)
    assert sessions.history(alice, "s1") == []
    assert sessions.store.prune_turns(clock.at, 100) == 5


def test_session_003_another_subject_sees_an_empty_session(
    make_store, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:  # type: ignore[no-untyped-def]
    sessions = SessionService(make_store())
    sessions.append(alice, "shared-id", "user", "alice's words")
    assert sessions.history(bob, "shared-id") == []
    assert sessions.history(other_tenant, "shared-id") == []
    sessions.append(bob, "shared-id", "user", "bob's words")
    assert [t.content for t in sessions.history(alice, "shared-id")] == ["alice's words"]
    assert [t.seq for t in sessions.history(bob, "shared-id")] == [1]


# -- JOB --------------------------------------------------------------------------------------


def test_job_001_lease_fencing_retry_and_cancel(make_store) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    queue = JobQueue(make_store(), lease=timedelta(seconds=30), clock=clock)
    job, created = queue.enqueue(NewJob("t1", "demo", "k1", {"n": 1}, max_attempts=3))
    again, created_again = queue.enqueue(NewJob("t1", "demo", "k1", {"n": 2}))
    assert created and not created_again and again.job_id == job.job_id
    first = queue.claim(["demo"], "w1")
    assert first is not None and first.job.attempts == 1 and queue.claim(["demo"], "w2") is None
    # the lease expires: another worker takes over with a higher fencing token
    clock.at += timedelta(seconds=31)
    second = queue.claim(["demo"], "w2")
    assert second is not None and second.token == first.token + 1
    with pytest.raises(LeaseLost):
        queue.complete(first, {"stale": True})
    with pytest.raises(LeaseLost):
        first.heartbeat()
    # a retryable failure goes back to the queue with backoff; the last attempt fails for good
    assert queue.fail(second, "boom") is JobStatus.QUEUED
    assert queue.claim(["demo"], "w2") is None  # backoff not over
    clock.at += timedelta(seconds=5)
    third = queue.claim(["demo"], "w2")
    assert third is not None and third.job.attempts == 3
    assert queue.fail(third, "boom again") is JobStatus.FAILED
    failed = queue.store.get_job(job.job_id)
    assert (
        failed is not None
        and failed.status is JobStatus.FAILED
        and failed.last_error == "boom again"
    )
    retried = queue.retry(job.job_id)
    assert retried.status is JobStatus.QUEUED and retried.attempts == 0
    cancelled = queue.cancel(job.job_id)
    assert cancelled.status is JobStatus.CANCELLED and queue.claim(["demo"], "w3") is None


def test_job_001_worker_records_outcomes(make_store) -> None:  # type: ignore[no-untyped-def]
    queue = JobQueue(make_store())
    calls: list[str] = []

    def ok(lease: Lease) -> dict[str, Any]:
        calls.append(lease.job.idempotency_key)
        lease.heartbeat({"step": 1})
        return {"done": True}

    def flaky(_lease: Lease) -> dict[str, Any]:
        raise Retryable("not yet")

    worker = Worker(queue, {"ok": ok, "flaky": flaky})
    a, _ = queue.enqueue(NewJob("t1", "ok", "a"))
    b, _ = queue.enqueue(NewJob("t1", "flaky", "b"))
    assert worker.drain() == 2
    done = queue.store.get_job(a.job_id)
    again = queue.store.get_job(b.job_id)
    assert done is not None and done.status is JobStatus.SUCCEEDED and done.result == {"done": True}
    assert done.checkpoint == {"step": 1}
    assert (
        again is not None
        and again.status is JobStatus.QUEUED
        and "not yet" in (again.last_error or "")
    )


# -- PROMO ------------------------------------------------------------------------------------


def _chat(rt, who: Principal, session: str) -> None:  # type: ignore[no-untyped-def]
    for role, text in [
        ("user", "I live in Porto and I work as a data engineer at Farfetch."),
        ("assistant", "Nice! How can I help?"),
        ("user", "I prefer vegetarian restaurants, and I'm allergic to peanuts."),
        ("user", "By the way, what's the weather like today?"),
    ]:
        rt.sessions.append(who, session, role, text)


def _promoted(rt, who: Principal) -> list[Any]:  # type: ignore[no-untyped-def]
    items = []
    for status in ("active", "superseded"):
        items += rt.service.list(
            who, scope="agent_user", statuses=[status], sources=["promoted"]
        ).items
    return items


def test_promo_002_repromotion_adds_zero_rows_including_superseded(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    rt = _runtime(make_store, local_embedder)
    _chat(rt, alice, "s1")
    _job, created = rt.sessions.promote(alice, "s1")
    assert created and rt.worker.drain() == 2  # the promotion, then its embed_pending job
    first = _promoted(rt, alice)
    texts = sorted(m.text for m in first)
    assert (
        len(first) >= 3 and any("Porto" in t for t in texts) and any("peanut" in t for t in texts)
    )
    assert all(m.source is Source.PROMOTED and m.provenance.session_id == "s1" for m in first)
    facts = [m for m in first if m.kind.value != "episode"]  # episodes: verbatim, no quote
    assert facts and all(m.provenance.quote and m.provenance.model for m in facts)
    # explicit call and sweep, repeatedly: zero net rows, counting superseded rows
    for _ in range(3):
        rt.sessions.promote(alice, "s1")
        rt.worker.drain()
        from quipu.jobs.promotion import sweep

        sweep(
            rt.service, timedelta(seconds=0), 100, lambda: datetime.now(UTC) + timedelta(minutes=1)
        )
        rt.worker.drain()
    assert sorted(m.id for m in _promoted(rt, alice)) == sorted(m.id for m in first)
    # new turns that only restate: re-extraction writes no new fact (the turn's own words
    # are kept as one new episode, issue 24)
    rt.sessions.append(alice, "s1", "user", "I live in Porto.")
    rt.sessions.promote(alice, "s1")
    rt.worker.drain()
    after = _promoted(rt, alice)
    assert [m.text for m in after if m.id not in {f.id for f in first}] == ["I live in Porto."]
    rt.close()


def test_promo_002_tiny_sessions_are_a_no_op_with_a_marker(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """A 1-turn session is a no-op (PROMO-2) that still advances its marker (JOB-2), so the
    sweep does not offer it again until a turn arrives (issue 20 #15)."""
    rt = _runtime(make_store, local_embedder)
    rt.sessions.append(alice, "one", "user", "I live in Porto.")
    job, _ = rt.sessions.promote(alice, "one")
    rt.worker.drain()
    done = rt.queue.store.get_job(job.job_id)
    assert done is not None and done.result["outcome"] == "noop" and _promoted(rt, alice) == []
    assert "PROMO-2" in done.result["why"] and "remember()" in done.result["why"]  # says why
    from quipu.core.sessions import SessionKey, session_owner
    from quipu.jobs.promotion import sweep

    mark = rt.service.store.get_watermark(SessionKey("t1", session_owner(alice), "one"))
    assert mark is not None and mark.status == "noop" and mark.last_seq == 1
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert sweep(rt.service, timedelta(0), 100, lambda: later)["queued"] == 0
    rt.sessions.append(alice, "one", "assistant", "Noted.")
    assert sweep(rt.service, timedelta(0), 100, lambda: later)["queued"] == 1
    rt.close()


def test_promo_004_promoted_supersedes_promoted_never_explicit(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    rt = _runtime(make_store, local_embedder)
    explicit = rt.service.remember(alice, "User lives in Porto", scope="agent_user").memory
    rt.sessions.append(alice, "s2", "user", "I live in Porto.")
    rt.sessions.append(alice, "s2", "assistant", "Noted.")
    rt.sessions.promote(alice, "s2")
    rt.worker.drain()
    assert rt.service.get(alice, explicit.id).status.value == "active"
    rt.sessions.append(alice, "s3", "user", "I work as a data engineer at Farfetch.")
    rt.sessions.append(alice, "s3", "assistant", "Cool.")
    rt.sessions.promote(alice, "s3")
    rt.worker.drain()
    rt.sessions.append(alice, "s4", "user", "I work as a senior data engineer at Farfetch now.")
    rt.sessions.append(alice, "s4", "assistant", "Congrats.")
    rt.sessions.promote(alice, "s4")
    rt.worker.drain()
    superseded = rt.service.list(alice, scope="agent_user", statuses=["superseded"]).items
    assert [m.source for m in superseded] == [Source.PROMOTED]
    assert (
        "data engineer" in superseded[0].text
        and rt.service.get(alice, explicit.id).status.value == "active"
    )
    rt.close()


def test_promo_005_quota_overflow_is_counted_and_budget_is_429(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    rt = _runtime(make_store, local_embedder, quota=1)
    _chat(rt, alice, "s1")
    job, _ = rt.sessions.promote(alice, "s1")
    rt.worker.drain()
    done = rt.queue.store.get_job(job.job_id)
    assert done is not None and done.result["created"] == 1 and done.result["dropped_quota"] >= 2
    sessions = SessionService(
        rt.service.store, SessionConfig(model_backed=True, model_budget_per_hour=1)
    )
    for session in ("m1", "m2"):
        sessions.append(alice, session, "user", "hello")
        sessions.append(alice, session, "assistant", "hi")
    sessions.promote(alice, "m1")
    with pytest.raises(LimitExceeded) as err:
        sessions.promote(alice, "m2")
    assert err.value.code == "budget_exhausted" and err.value.retry_after is not None
    rt.close()


def test_promo_006_sweep_takes_nearest_expiry_first_and_config_is_checked(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    sessions = SessionService(store, SessionConfig(ttl=timedelta(days=1)), Clock())
    sessions.append(alice, "late", "user", "a", expires_at=NOW + timedelta(days=3))
    sessions.append(alice, "soon", "user", "b", expires_at=NOW + timedelta(hours=2))
    sessions.append(alice, "mid", "user", "c", expires_at=NOW + timedelta(days=1))
    idle = store.idle_sessions(NOW + timedelta(minutes=5), NOW + timedelta(minutes=5), 10)
    assert [s.key.session_id for s in idle] == ["soon", "mid", "late"]
    with pytest.raises(Exception, match="sweep_interval_seconds < sweep_window_seconds"):
        load_settings({"sweep_interval_seconds": 600, "sweep_window_seconds": 300}, environ={})


def test_promo_001_one_job_per_session_at_a_time(
    make_store, local_embedder, alice: Principal, bob: Principal
) -> None:  # type: ignore[no-untyped-def]
    rt = _runtime(make_store, local_embedder)
    a1, c1 = rt.sessions.promote(alice, "s")
    a2, c2 = rt.sessions.promote(alice, "s")
    b1, c3 = rt.sessions.promote(bob, "s")
    assert c1 and not c2 and c3 and a1.job_id == a2.job_id != b1.job_id
    rt.close()


def test_promo_service_principal_needs_nothing_from_body(make_store, local_embedder) -> None:  # type: ignore[no-untyped-def]
    rt = _runtime(make_store, local_embedder)
    runner = Principal("t1", "run-token", Role.AGENT, agent_id="alice", user_id="u-alice")
    _chat(rt, runner, "s9")
    rt.sessions.promote(runner, "s9")
    rt.worker.drain()
    assert _promoted(rt, runner)
    rt.close()


def test_job_002_periodic_slot_runs_once_per_scheduler(make_store) -> None:  # type: ignore[no-untyped-def]
    """A finished periodic job is not enqueued again in the same slot (it used to be, at once,
    so the worker ran the periodic jobs back to back); the next slot enqueues it again."""
    queue = JobQueue(make_store())
    runs: list[str] = []
    worker = Worker(
        queue,
        {"tick": lambda lease: runs.append(lease.job.idempotency_key) or {}},
        periodic=(Periodic("tick", timedelta(minutes=5)),),
    )
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert worker.schedule(start) == 1
    assert worker.drain() == 1
    assert worker.schedule(start + timedelta(seconds=30)) == 0
    assert worker.drain() == 0
    assert worker.schedule(start + timedelta(minutes=5)) == 1
    assert worker.drain() == 1
    assert len(runs) == 2 and runs[0] != runs[1]
