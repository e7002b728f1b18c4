"""Harvest on every backend (issue 24, HARVEST-1): spans persisted at once as one durable job
and extracted as one batch (a pronoun in a later span resolved with the person an earlier span
named), by whichever worker runs next — also a fresh one after a restart; a full queue (per
tenant and scope owner) or a store outage at accept time drops the batch with a counted,
visible reason and never fails or holds the caller; a re-run job never writes a fact twice;
the spans never reach another tenant nor, holding a secret, the jobs table (SAFE-1); hostile
spans refused with stable 422 codes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quipu.core.jobs import JobStatus, NewJob
from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import Principal, Role, Source, Status
from quipu.core.scopes import resolve_scope
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Forbidden, InvalidInput, NotFound, SecretDetected
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.harvest import HARVEST_BATCH, Harvester
from quipu.jobs import handlers
from quipu.jobs.queue import JobQueue, Lease
from quipu.jobs.visibility import job_view, visible_job, visible_jobs
from quipu.memories import MemoryService
from quipu.settings import Settings

SPANS = [
    "My sister Ana is a doctor.",
    "We talked about the weather today.",
    "She moved to Porto last year.",
]
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _harvested(service: MemoryService, who: Principal, *, live: bool = True) -> list[str]:
    statuses = frozenset({Status.ACTIVE}) if live else frozenset(Status)
    flt = Filters(sources=frozenset({Source.HARVESTED}), statuses=statuses)
    page = service.store.list_page(resolve_scope(who, "agent"), flt, None, 100)
    return sorted(m.text for m in page.items)


def _quiet(service: MemoryService, capacity: int = 64, **kw: Any) -> Harvester:
    """A harvester whose jobs run only when the test drains them (no thread of its own)."""
    return Harvester(service, DeterministicExtractor(), capacity=capacity, run_jobs=False, **kw)


def receipt_year() -> int:
    return datetime.now(UTC).year


def test_harvest_1_whole_batch_keeps_the_cross_span_reference(
    service: MemoryService, alice: Principal
) -> None:
    harvester = Harvester(service, DeterministicExtractor())
    receipt = harvester.harvest(alice, SPANS, boundary="compaction", session_id="run-7")
    assert receipt.accepted and receipt.spans == 3 and receipt.reason is None
    assert harvester.drain(20)
    texts = _harvested(service, alice)
    # span 3 resolved by span 1; "last year" against the time the batch was handed over
    assert f"User's sister Ana moved to Porto in {receipt_year() - 1}" in texts
    page = service.store.list_page(
        resolve_scope(alice, "agent"), Filters(sources=frozenset({Source.HARVESTED})), None, 10
    )
    moved = next(m for m in page.items if "Porto" in m.text)
    assert moved.trust.value == "unverified" and moved.provenance.session_id == "run-7"
    assert moved.metadata["boundary"] == "compaction" and moved.metadata["span"] == 2
    assert moved.metadata["batch_id"] == receipt.batch_id
    assert harvester.stats()["counts"]["extracted:compaction"] == 1
    harvester.close()


def test_harvest_1_accepted_batch_survives_a_restart(
    make_store: Callable[[str], Any], local_embedder: LocalEmbedder, alice: Principal
) -> None:
    """Accepted by one instance, whose process then dies before any worker ran; a fresh
    instance over the reopened store extracts the batch whole (the old in-memory queue lost
    it)."""
    first = MemoryService(make_store("restart.db"), local_embedder, Limits())
    handed = datetime(2024, 5, 1, 12, tzinfo=UTC)
    receipt = _quiet(first, clock=lambda: handed).harvest(
        alice, SPANS, boundary="recap", session_id="s-1"
    )
    assert receipt.accepted
    first.store.close()  # the restart: nothing of the first process survives but the store

    second = MemoryService(make_store("restart.db"), local_embedder, Limits())
    assert _harvested(second, alice) == []
    fresh = _quiet(second)
    worker = handlers.build_worker(
        Settings(), second, JobQueue(second.store), fresh.extractor, harvest=fresh
    )
    assert worker.drain() == 1
    # whole batch, and "last year" resolved against when it was handed over, not run
    assert "User's sister Ana moved to Porto in 2023" in _harvested(second, alice)
    assert second.store.count_active_jobs(HARVEST_BATCH) == 0
    assert fresh.stats()["counts"]["extracted:recap"] == 1


def test_harvest_1_full_queue_drops_the_batch_counted_per_scope_owner(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    harvester = _quiet(service, capacity=2)
    seen: list[tuple[str, str]] = []
    harvester.observer = lambda outcome, reason: seen.append((outcome, reason))
    first = harvester.harvest(alice, SPANS)
    second = harvester.harvest(alice, ["I live in Lisbon."], boundary="recap")
    third = harvester.harvest(alice, ["I work at a bakery."], boundary="stateful")
    assert first.accepted and second.accepted
    assert (third.accepted, third.reason) == (False, "queue_full")
    assert harvester.stats()["counts"]["dropped:queue_full"] == 1
    assert ("dropped", "queue_full") in seen
    # the bound is per tenant and scope owner: another agent's batch still goes in
    assert harvester.harvest(bob, ["I live in Braga."]).accepted
    assert harvester.drain(30)
    texts = _harvested(service, alice)
    assert any("Lisbon" in t for t in texts) and not any("bakery" in t for t in texts)
    # extracted batches leave the queue: the scope takes batches again
    assert harvester.harvest(alice, ["I work at a bakery."]).accepted


class _HeldStore:
    """The real store, with the harvest enqueue held at a gate (a database that stopped
    answering) and its calls counted."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.calls = 0

    def enqueue_bounded_job(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.gate.wait(30)
        return self.inner.enqueue_bounded_job(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_harvest_1_store_outage_at_accept_drops_the_batch_counted(
    service: MemoryService, alice: Principal, backend: str
) -> None:
    harvester = _quiet(service)
    seen: list[tuple[str, str]] = []
    harvester.observer = lambda outcome, reason: seen.append((outcome, reason))
    held = _HeldStore(service.store)
    harvester.store = held  # type: ignore[assignment]
    harvester.accept_timeout = 0.2
    # a store that does not answer: the caller is answered while the store still holds it
    receipt = harvester.harvest(alice, SPANS)
    assert (receipt.accepted, receipt.reason) == (False, "store_unavailable")
    assert not held.gate.is_set() and held.calls == 1
    # right after an outage, batches are dropped without waiting on the store again
    again = harvester.harvest(alice, ["I live in Lisbon."])
    assert (again.accepted, again.reason) == (False, "store_unavailable") and held.calls == 1
    assert harvester.stats()["counts"]["dropped:store_unavailable"] == 2
    assert seen.count(("dropped", "store_unavailable")) == 2
    # the store answers late: the batch answered as dropped is cancelled, never extracted
    held.gate.set()
    if backend != "citus":  # Citus test schemas are reused: a job worker an earlier test left
        # running may claim the late batch before its cancel (seen once in CI); SQLite and
        # PostgreSQL give each test its own database
        for _ in range(400):
            statuses = [j.status for j in service.store.list_jobs("t1", None, 10)]
            if statuses == [JobStatus.CANCELLED]:
                break
            threading.Event().wait(0.05)
        assert statuses == [JobStatus.CANCELLED]
        assert harvester.drain(10) and _harvested(service, alice) == []
    # a closed store (the database gone) is an answer too, not an error
    closed = _quiet(service)
    service.store.close()
    gone = closed.harvest(alice, SPANS)
    assert (gone.accepted, gone.reason) == (False, "store_unavailable")


class _CrashAfter(Lease):
    """A lease whose holder dies after ``writes`` checkpoints (the process killed mid-batch)."""

    writes = 1

    def heartbeat(self, checkpoint: dict[str, Any] | None = None) -> None:
        super().heartbeat(checkpoint)
        self.writes -= 1
        if self.writes <= 0:
            raise KeyboardInterrupt("killed")


def test_harvest_1_rerun_job_writes_no_fact_twice(service: MemoryService, alice: Principal) -> None:
    spans = [*SPANS, "I work at a bakery in Faro.", "My favourite colour is green."]
    once = _quiet(service)
    assert once.harvest(alice, spans).accepted
    queue = JobQueue(service.store, lease=timedelta(seconds=30))
    lease = queue.claim([HARVEST_BATCH], "w1")
    assert lease is not None
    with pytest.raises(KeyboardInterrupt):  # dies after its first fact
        once.run(_CrashAfter(lease.job, queue))
    first = _harvested(service, alice)
    assert len(first) == 1
    # the user forgets that fact before the job runs again: it must not come back
    page = service.store.list_page(
        resolve_scope(alice, "agent"), Filters(sources=frozenset({Source.HARVESTED})), None, 5
    )
    service.forget(alice, page.items[0].id)
    later = JobQueue(service.store, clock=lambda: datetime.now(UTC) + timedelta(minutes=2))
    again = later.claim([HARVEST_BATCH], "w2")  # the dead holder's lease has expired
    assert again is not None and again.job.attempts == 2
    result = once.run(again)
    later.complete(again, result)
    texts = _harvested(service, alice, live=False)
    assert len(texts) == len(set(texts)) and first[0] in texts
    assert first[0] not in _harvested(service, alice)  # still forgotten
    assert result["written"] >= 2
    # the same batch delivered again as another job writes nothing
    service.store.enqueue_job(
        NewJob("t1", HARVEST_BATCH, "redelivered", again.job.payload), datetime.now(UTC)
    )
    third = queue.claim([HARVEST_BATCH], "w3")
    assert third is not None and third.job.idempotency_key == "redelivered"
    assert once.run(third)["written"] == 0
    assert _harvested(service, alice, live=False) == texts


def test_harvest_1_jobs_are_tenant_isolated(
    service: MemoryService, alice: Principal, other_tenant: Principal
) -> None:
    harvester = _quiet(service)
    assert harvester.harvest(alice, SPANS).accepted
    (job,) = service.store.list_jobs("t1", None, 10)
    admin_t2 = Principal("t2", "key-admin2", Role.ADMIN)
    assert visible_jobs(service.store, admin_t2) == []
    with pytest.raises(NotFound):
        visible_job(service.store, admin_t2, job.job_id)
    with pytest.raises(NotFound):
        visible_job(service.store, other_tenant, job.job_id)
    # its own tenant's admin and the caller see the job, never the spans it carries
    admin_t1 = Principal("t1", "key-admin1", Role.ADMIN)
    for who in (admin_t1, alice):
        shown = json.dumps(job_view(who, visible_job(service.store, who, job.job_id)))
        assert "Porto" not in shown and "sister" not in shown
    assert harvester.drain(20)
    assert _harvested(service, other_tenant) == []
    assert _harvested(service, alice)


def test_safe_1_harvest_span_with_a_secret_is_refused_before_the_jobs_table(
    service: MemoryService, alice: Principal
) -> None:
    harvester = _quiet(service)
    with pytest.raises(SecretDetected) as refused:
        harvester.harvest(alice, ["My sister Ana is a doctor.", f"the token is {SECRET}"])
    assert refused.value.status == 422 and refused.value.code == "secret_detected"
    assert "spans[1]" in refused.value.message and SECRET not in refused.value.message
    assert service.store.list_jobs(None, None, 100) == []
    assert harvester.stats()["counts"]["refused:secret_detected"] == 1


@pytest.mark.parametrize(
    ("spans", "boundary", "code"),
    [
        ([], "compaction", "invalid_spans"),
        (["x"] * 65, "compaction", "invalid_spans"),
        ("just a string", "compaction", "invalid_spans"),
        (["   "], "compaction", "invalid_spans"),
        ([{"role": "wizard", "content": "hi"}], "compaction", "invalid_spans"),
        ([{"content": "hi", "tenant_id": "t2"}], "compaction", "invalid_spans"),
        ([42], "compaction", "invalid_spans"),
        (["x" * 32_001], "compaction", "invalid_spans"),
        (["ok"], "summary", "invalid_boundary"),
        (["nul\x00byte"], "compaction", "invalid_text"),
        (["lone \ud800 surrogate"], "compaction", "invalid_text"),
    ],
)
def test_harvest_1_hostile_spans_are_422(
    service: MemoryService, alice: Principal, spans: object, boundary: str, code: str
) -> None:
    harvester = _quiet(service)
    with pytest.raises(InvalidInput) as bad:
        harvester.harvest(alice, spans, boundary=boundary)
    assert bad.value.code == code and bad.value.status == 422
    assert harvester.stats()["queued"] == 0


def test_harvest_1_tenant_scope_needs_the_grant(service: MemoryService, alice: Principal) -> None:
    harvester = _quiet(service)
    with pytest.raises(Forbidden):
        harvester.harvest(alice, SPANS, scope="tenant")
