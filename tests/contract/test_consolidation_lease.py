"""The per-scope consolidation lease with a cooldown, on every backend (issue 24, CONSOL-4):
one consolidation of a scope at a time across workers, a cooldown between two runs, durable in
the store (a job that finds the scope busy waits in the queue, it is not lost), and a lease
whose holder died is taken over once it expires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from quipu.consolidation.index import LEASE, ConsolidationBusy, IndexService
from quipu.consolidation.jobs import CONSOLIDATE_INDEX, IndexJobs
from quipu.core.jobs import JobStatus, NewJob
from quipu.core.records import Principal
from quipu.core.scopes import resolve_scope
from quipu.jobs.queue import JobQueue
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def test_consol_004_one_consolidation_of_a_scope_at_a_time_across_workers(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    """Issue 24: nothing but the job key kept two builders of one scope apart; an explicit
    rebuild and a worker's job (or two processes) ran side by side."""
    clock = Clock()
    ref = resolve_scope(alice, "agent")
    service.remember(alice, "User's favourite colour is teal.")
    first, second = (IndexService(service, cache_seconds=0, clock=clock) for _ in range(2))
    held = service.store.consolidation_lease(
        ref, "worker-a", START, START + LEASE, timedelta(0)
    )  # another worker is building this scope now
    assert held.granted and held.token == 1
    for builder in (first, second):
        with pytest.raises(ConsolidationBusy) as busy:
            builder.consolidate(ref)
        assert busy.value.code == "consolidation_busy" and busy.value.status == 409
        assert busy.value.transient and busy.value.details["reason"] == "held"
        assert busy.value.retry_at == START + LEASE
    assert service.store.index_get(ref, None) is None  # nothing built beside the holder
    # another scope is not held up
    service.remember(bob, "User's dog is called Rex.")
    assert first.consolidate(resolve_scope(bob, "agent")).version == 1
    # released: the next builder goes
    assert service.store.consolidation_release(ref, held.token, START)
    assert second.consolidate(ref).version == 1
    # a holder that died: its lease is taken over once expired, and its late release is void
    dead = service.store.consolidation_lease(ref, "worker-b", START, START + LEASE, timedelta(0))
    clock.now = START + LEASE + timedelta(seconds=1)
    service.remember(alice, "User's favourite food is ramen.")
    assert first.consolidate(ref).version == 2
    assert not service.store.consolidation_release(ref, dead.token, clock.now)


def test_consol_004_cooldown_defers_the_scope_job_in_the_queue(
    service: MemoryService, alice: Principal
) -> None:
    """Issue 24: consolidation had no cooldown; a scope written all day was rebuilt after each
    quiet spell. A job due within the cooldown goes back to the queue until it ends."""
    clock = Clock()
    ref = resolve_scope(alice, "agent")
    index = IndexService(service, cache_seconds=0, clock=clock)
    queue = JobQueue(service.store, clock=clock)
    jobs = IndexJobs(index, queue, debounce=timedelta(0), cooldown=timedelta(seconds=60))
    worker = Worker(queue, {CONSOLIDATE_INDEX: jobs.consolidate})

    def enqueue() -> str:
        job, _ = queue.enqueue(
            NewJob(alice.tenant_id, CONSOLIDATE_INDEX, "index:agent:alice",
                   payload={"scope": ref.scope.value, "owner": ref.owner})
        )  # fmt: skip
        return job.job_id

    service.remember(alice, "User's favourite colour is teal.")
    enqueue()
    assert worker.run_once() is JobStatus.SUCCEEDED
    clock.now += timedelta(seconds=10)
    service.remember(alice, "User's favourite food is ramen.")
    waiting = enqueue()
    assert worker.run_once() is JobStatus.QUEUED  # deferred, not failed
    job = service.store.get_job(waiting)
    assert job is not None and job.status is JobStatus.QUEUED and job.last_error is None
    assert job.run_after == START + timedelta(seconds=60)
    assert job.result["deferred"] == "consolidation_busy"
    assert worker.run_once() is None  # not due yet
    current = service.store.index_get(ref, None)
    assert current is not None and current.version == 1
    clock.now = START + timedelta(seconds=61)
    assert worker.run_once() is JobStatus.SUCCEEDED
    current = service.store.index_get(ref, None)
    assert current is not None and current.version == 2 and len(current.active) == 2
    # an explicit rebuild waits for no cooldown
    service.remember(alice, "User's cat is called Mo.")
    assert index.rebuild(alice).version == 3
