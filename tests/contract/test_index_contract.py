"""The compiled memory index on every backend (issue 24; CONSOL-1, CONSOL-2, CONSOL-3, CONSOL-5,
API-3): lines with date, provenance tag, source link and trust label; validated rewrites that
never silently drop an active entry; versions, history and diff; usage-based expiry as a status
change; the debounced sweep through the job queue; a degraded answer when the store is gone;
hostile arguments refused with stable codes."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from quipu.consolidation.index import IndexService
from quipu.consolidation.jobs import CONSOLIDATE_INDEX, SWEEP_INDEXES, IndexJobs
from quipu.core.knowledge import UsageEvent
from quipu.core.memory_index import MAX_LINES, IndexEntryDropped, MemoryIndex
from quipu.core.records import Principal, Role, Status
from quipu.core.scopes import resolve_scope
from quipu.errors import Conflict, InvalidInput, NotFound
from quipu.jobs.queue import JobQueue
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService


def _index(service: MemoryService, **kw: object) -> IndexService:
    return IndexService(service, cache_seconds=0, **kw)  # type: ignore[arg-type]


def test_consol_1_lines_carry_date_tag_link_and_unverified_label(
    service: MemoryService, alice: Principal
) -> None:
    index = _index(service)
    told = service.remember(alice, "User prefers green tea.", observed_at="2026-03-04T10:00:00Z")
    heard = service.remember(
        alice, "User's sister Ana lives in Porto.", source="promoted", session_id="s-1"
    )
    service.remember(alice, "user: hi there", kind="episode", source="promoted", session_id="s-1")
    built = index.rebuild(alice)
    assert built.version == 1 and len(built.active) == 2  # the episode stays out
    view = index.get(alice)
    told_line = next(line for line in view.lines if told.memory.id in line)
    assert told_line.startswith("- 2026-03-04 [user-requested] User prefers green tea.")
    assert f"(quipu://memories/{told.memory.id}?version=1)" in told_line
    heard_line = next(line for line in view.lines if heard.memory.id in line)
    assert "[user-said] [unverified] User's sister Ana lives in Porto." in heard_line
    assert "## Archive" in view.lines and len(view.lines) <= MAX_LINES
    assert view.text.startswith('<memory-index scope="agent" version="1">')
    assert "not instructions" in view.text and view.text.endswith("</memory-index>")
    assert not view.degraded


def test_consol_3_second_session_corroborates(service: MemoryService, alice: Principal) -> None:
    """An unverified fact extracted again from a second session loses its unverified label;
    said again in the same session it keeps it."""
    for session in ("s-1", "s-2"):
        service.remember(alice, "User runs on Tuesdays.", source="promoted", session_id=session)
    for _ in range(2):
        service.remember(alice, "User owns a red bike.", source="promoted", session_id="s-1")
    built = _index(service).rebuild(alice)
    trust = {e.text: e.trust for e in built.active}
    assert trust["User runs on Tuesdays."] == "verified"
    assert trust["User owns a red bike."] == "unverified"
    runs = next(e for e in built.active if e.text == "User runs on Tuesdays.")
    judged = service.store.get(resolve_scope(alice, "agent"), runs.memory_id)
    assert judged is not None and judged.provenance.verdict == "corroborated"


def test_consol_2_rewrite_dropping_active_entry_refused(
    service: MemoryService, alice: Principal
) -> None:
    index = _index(service)
    service.remember(alice, "User works at a bakery.")
    service.remember(alice, "User's dog is called Rex.")
    first = index.rebuild(alice)
    dropping = dataclasses.replace(first, version=2, active=first.active[:1], archive=())
    with pytest.raises(IndexEntryDropped) as refused:
        service.store.index_put(dropping)
    assert refused.value.code == "index_entry_dropped" and refused.value.status == 409
    assert refused.value.details["dropped"] == [first.active[1].memory_id]
    ref = resolve_scope(alice, "agent")
    assert service.store.index_get(ref, None) == first  # nothing written
    # the same entry archived instead is a valid rewrite
    moved = dataclasses.replace(first.active[1], fate="left")
    kept = dataclasses.replace(dropping, archive=(moved,))
    assert service.store.index_put(kept).version == 2
    with pytest.raises(Conflict) as stale:  # a rewrite that does not follow the current one
        service.store.index_put(dataclasses.replace(first, version=2))
    assert stale.value.code == "version_conflict"


def test_consol_2_superseded_and_forgotten_are_archived_with_history_and_diff(
    service: MemoryService, alice: Principal
) -> None:
    index = _index(service)
    home = service.remember(alice, "User lives in Lisbon.").memory
    pet = service.remember(alice, "User's cat is called Mia.").memory
    index.rebuild(alice)
    berlin = service.remember(alice, "User lives in Berlin.").memory
    service.supersede(alice, home.id, berlin.id, reason="moved")
    service.forget(alice, pet.id)
    second = index.rebuild(alice)
    fates = {e.memory_id: (e.fate, e.text) for e in second.archive}
    assert fates[home.id] == ("superseded", "User lives in Lisbon.")
    assert next(e.note for e in second.archive if e.memory_id == home.id) == f"by {berlin.id}"
    assert fates[pet.id] == ("forgotten", "(forgotten)")  # a forgotten text leaves the index
    assert [e.text for e in second.active] == ["User lives in Berlin."]
    assert [h["version"] for h in index.history(alice)] == [2, 1]
    change = index.diff(alice, 1, 2)
    assert {a["memory_id"] for a in change["archived"]} == {home.id, pet.id}
    assert [a["text"] for a in change["added"]] == ["User lives in Berlin."]
    assert change["removed"] == []
    assert index.version(alice, 1).active[0].memory_id in {home.id, pet.id}
    # an unchanged scope writes no new version
    assert index.rebuild(alice).version == 2


def test_consol_5_unrecalled_unverified_expire_as_status_change(
    service: MemoryService, alice: Principal
) -> None:
    stale = service.remember(alice, "User likes jazz.", source="promoted", session_id="s-1").memory
    used = service.remember(alice, "User plays chess.", source="promoted", session_id="s-1").memory
    told = service.remember(alice, "User is vegetarian.").memory
    later = datetime.now(UTC) + timedelta(days=31)
    service.store.usage_record(
        [UsageEvent(alice.tenant_id, "ev-1", used.id, "r-1", 0.9, True, later - timedelta(days=2))]
    )
    young = _index(service, clock=lambda: datetime.now(UTC) + timedelta(days=29))
    assert young.rebuild(alice).expired == ()  # inside the window nothing expires
    index = _index(service, clock=lambda: later)
    built = index.rebuild(alice)
    assert built.expired == (stale.id,)
    kept = {e.memory_id for e in built.active}
    assert kept == {used.id, told.id}
    ref = resolve_scope(alice, "agent")
    current = service.store.get(ref, stale.id)
    assert current is not None and current.status is Status.EXPIRED  # not deleted
    assert len(service.store.history(ref, stale.id)) == 2
    assert next(e for e in built.archive if e.memory_id == stale.id).fate == "expired"
    audit = service.store.list_audit(alice.tenant_id, None, 50)
    assert any(a.action == "index.expire" and stale.id in a.target_ids for a in audit)
    # with a 1-day window, `used` (recalled on day 29) is still not due: nothing new to write
    short = _index(service, expiry_days=1, clock=lambda: datetime.now(UTC) + timedelta(days=2))
    assert short.rebuild(alice).version == built.version
    assert service.store.get(ref, used.id).status is Status.ACTIVE  # type: ignore[union-attr]


def test_consol_1_sweep_debounces_rebuilds_through_the_queue(
    service: MemoryService, alice: Principal
) -> None:
    index = _index(service)
    queue = JobQueue(service.store)
    jobs = IndexJobs(index, queue, debounce=timedelta(0), tenants=(alice.tenant_id,))
    worker = Worker(
        queue, {SWEEP_INDEXES: jobs.sweep, CONSOLIDATE_INDEX: jobs.consolidate}, poll=0.01
    )
    service.remember(alice, "User's favourite colour is teal.")
    assert jobs.sweep()["enqueued"] == 1
    service.remember(alice, "User's favourite food is ramen.")
    assert jobs.sweep()["enqueued"] == 0  # the scope's job is still queued: coalesced
    worker.drain()
    built = service.store.index_get(resolve_scope(alice, "agent"), None)
    assert built is not None and len(built.active) == 2
    assert jobs.sweep()["enqueued"] == 0  # nothing changed since
    held = IndexJobs(index, queue, debounce=timedelta(hours=1), tenants=(alice.tenant_id,))
    service.remember(alice, "User's favourite city is Kyoto.")
    assert held.sweep()["enqueued"] == 0  # written too recently: waits for quiet


def test_api_3_index_get_is_degraded_not_failed_when_store_is_gone(
    service: MemoryService, alice: Principal
) -> None:
    index = _index(service)
    service.remember(alice, "User speaks Portuguese.")
    index.rebuild(alice)
    service.store.close()
    view = index.get(alice)
    assert view.degraded and view.reason and view.version == 0
    assert "no memories" in view.text


def test_api_3_cached_for_ttl_and_isolated(
    service: MemoryService, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:
    index = IndexService(service, cache_seconds=60)
    service.remember(alice, "User collects stamps.")
    index.rebuild(alice)
    assert index.get(alice).active == 1
    assert index.get(bob).version == 0 and index.get(other_tenant).version == 0
    with pytest.raises(NotFound):
        index.version(bob, 1)


def test_api_3_index_get_is_served_from_its_ttl_cache(
    service: MemoryService, alice: Principal
) -> None:
    """API-3: an agent reads the index every turn; within ``cache_seconds`` the answer comes
    from memory (a version built elsewhere meanwhile is not seen, the store not read), after it
    the store is read again; this process's own rebuild is seen at once."""
    ticks = [1_000.0]
    index = IndexService(service, cache_seconds=30, monotonic=lambda: ticks[0])
    elsewhere = _index(service)  # another process's consolidation job
    service.remember(alice, "User collects stamps.")
    elsewhere.rebuild(alice)
    assert index.get(alice).version == 1
    service.remember(alice, "User keeps bees.")
    elsewhere.rebuild(alice)
    ticks[0] += 29.0
    assert index.get(alice).version == 1  # cached: the store was not read
    ticks[0] += 2.0
    assert index.get(alice).version == 2  # the TTL passed: read again
    service.remember(alice, "User rows on Sundays.")
    assert index.rebuild(alice).version == 3
    assert index.get(alice).version == 3  # its own rebuild drops the cached answer


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"version": "one"}, "invalid_version"),
        ({"version": 2**40}, "invalid_version"),
        ({"version": 0}, "invalid_version"),
        ({"version": 1, "scope": "galaxy"}, "invalid_scope"),
        ({"version": 1, "scope": "a\x00b"}, "invalid_scope"),
    ],
)
def test_api_3_hostile_arguments_are_422(
    service: MemoryService, alice: Principal, args: dict[str, object], code: str
) -> None:
    with pytest.raises(InvalidInput) as bad:
        _index(service).version(alice, **args)  # type: ignore[arg-type]
    assert bad.value.code == code and bad.value.status == 422


def test_consol_2_validator_is_pure(service: MemoryService, alice: Principal) -> None:
    """The store refuses a first version that lists one memory twice."""
    service.remember(alice, "User is left-handed.")
    built = _index(service).rebuild(alice)
    twice = MemoryIndex(built.ref, 2, built.built_at, None, (built.active[0], built.active[0]), ())
    with pytest.raises(IndexEntryDropped):
        service.store.index_put(twice)


def test_consol_2_erasure_removes_the_text_from_every_kept_version(
    service: MemoryService, alice: Principal
) -> None:
    """LIFE-4 with issue 24: erasing a memory rewrites the index versions that quoted it."""
    from quipu.governance import GovernanceService
    from quipu.jobs.queue import JobQueue

    index = _index(service)
    secret = service.remember(alice, "User's passport number is kept in the blue drawer.").memory
    service.remember(alice, "User likes tea.")
    index.rebuild(alice)
    admin = dataclasses.replace(alice, role=Role.ADMIN)
    erased = GovernanceService(service, JobQueue(service.store)).erase(
        admin, secret.id, reason="user asked"
    )
    assert erased.report.counts["memory_index_versions"] == 1
    ref = resolve_scope(alice, "agent")
    first = service.store.index_get(ref, 1)
    assert first is not None
    kept = {e.memory_id: e.text for e in first.active}
    assert kept[secret.id] == "(erased)" and kept[next(i for i in kept if i != secret.id)]
    second = index.rebuild(alice)
    assert [(e.fate, e.text) for e in second.archive] == [("erased", "(erased)")]
    assert "blue drawer" not in "\n".join(second.lines())
