"""Usage events, recall counts and graduation on every backend (issue 25: RECALL-6, GRAD-1):
events off the request path with a drop counter, the 0.6 relevance floor, the cooldown, the
fallback path that never bumps, graduation once (409 ``already_graduated``), re-scope, the
sweep's bounds and fairness, and a gate that cannot run stamping nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from quipu.core.knowledge import ArticleStatus, Verdict, Visibility
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Conflict, Forbidden, InvalidInput, NotFound, Unavailable
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.usage import Graduation, UsageRecorder
from tests.support.embedding_server import EmbeddingServer

TEAM = Principal(
    "t1",
    "key-team",
    Role.AGENT,
    agent_id="alice",
    user_id="u-alice",
    grants=frozenset({"tenant:write"}),
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _recorder(service: MemoryService, clock: Clock, **kw: object) -> UsageRecorder:
    rec = UsageRecorder(service.store, service.embedder, clock=clock, **kw)  # type: ignore[arg-type]
    service.usage = rec
    return rec


def test_recall_006_relevant_hits_count_once_per_cooldown(
    service: MemoryService, alice: Principal
) -> None:
    clock = Clock()
    rec = _recorder(service, clock)
    m = service.remember(alice, "The staging deploy needs the VPN switched on.").memory
    other = service.remember(alice, "Lunch on Fridays is pizza with the team.").memory
    for _ in range(3):
        service.recall(alice, "does the staging deploy need the VPN?")
    rec.flush()
    events = service.store.usage_events("t1", m.id)
    assert len(events) == 3 and all(e.relevant for e in events)
    assert all(e.score >= 0.6 for e in events)
    assert service.store.memory_usage("t1", m.id).recall_count == 1  # cooldown
    assert not any(e.relevant for e in service.store.usage_events("t1", other.id))
    clock.now += timedelta(seconds=3600)
    service.recall(alice, "does the staging deploy need the VPN?")
    rec.flush()
    usage = service.store.memory_usage("t1", m.id)
    assert usage.recall_count == 2 and usage.last_bumped_at == clock.now
    assert service.store.memory_usage("t1", other.id) is None
    rec.close()


def test_recall_006_the_fallback_path_never_bumps(
    make_store,  # type: ignore[no-untyped-def]
    embedding_server: EmbeddingServer,
    remote_embedder,  # type: ignore[no-untyped-def]
    alice: Principal,
) -> None:
    service = MemoryService(make_store(), remote_embedder, Limits())
    rec = _recorder(service, Clock())
    m = service.remember(alice, "The staging deploy needs the VPN switched on.").memory
    service.usage = None
    embedding_server.down = True
    query = "The staging deploy needs the VPN switched on."  # cosine 1 once measurable
    result = service.recall(alice, query)
    assert result.meta["fallback"] is True and result.results
    embedding_server.down = False  # the recorder could measure it now: it must not
    rec.offer("t1", query, result)
    rec.flush()
    (event,) = service.store.usage_events("t1", m.id)
    assert event.relevant is False
    assert service.store.memory_usage("t1", m.id) is None
    rec.close()


def test_recall_006_a_full_queue_drops_and_counts_never_blocks(
    tmp_path: Path, local_embedder: LocalEmbedder, alice: Principal
) -> None:
    """The queue, not a backend: a SQLite store whose one writer lock the test holds, so the
    recorder's thread cannot write and the queue (one slot) fills."""
    store = SQLiteStore(tmp_path / "q.db")
    service = MemoryService(store, local_embedder, Limits())
    rec = _recorder(service, Clock(), capacity=1)
    service.remember(alice, "The staging deploy needs the VPN switched on.")
    with store._write_lock:
        for _ in range(5):
            assert service.recall(alice, "staging deploy VPN").results  # never blocks
        assert rec.dropped >= 3
    rec.flush()
    assert rec.recorded >= 1 and rec.failed == 0
    rec.close()
    store.close()


def test_grad_001_graduate_once_owner_draft_then_409(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    grad = Graduation(KnowledgeService(service))
    m = service.remember(alice, "Deploys to staging need the VPN and the release branch.").memory
    first = grad.graduate(alice, m.id)
    assert first.verdict is Verdict.CREATED and first.created
    art = grad.knowledge.get(alice, first.article["id"])
    assert (art.visibility, art.status, art.memory_id) == (
        Visibility.OWNER,
        ArticleStatus.DRAFT,
        m.id,
    )
    with pytest.raises(NotFound):
        grad.knowledge.get(bob, art.id)  # owner-visible: not the peer's
    again = grad.graduate(alice, m.id)
    assert again.verdict is Verdict.DEDUPLICATED and again.article["id"] == art.id
    with pytest.raises(Forbidden):
        grad.graduate(alice, m.id, re_scope="tenant")  # no tenant grant
    with pytest.raises(NotFound):
        grad.graduate(bob, m.id)  # not bob's memory: 404, no existence oracle
    for bad, code in (("../x", "invalid_memory_id"), (7, "invalid_memory_id")):
        with pytest.raises(InvalidInput) as err:
            grad.graduate(alice, bad)
        assert err.value.code == code
    with pytest.raises(InvalidInput) as err:
        grad.graduate(alice, m.id, re_scope="global")
    assert err.value.code == "invalid_re_scope"


def test_grad_001_re_scope_first_then_409_for_a_narrow_one(service: MemoryService) -> None:
    grad = Graduation(KnowledgeService(service))
    wide = service.remember(TEAM, "Release trains leave every second Wednesday.").memory
    done = grad.graduate(TEAM, wide.id, re_scope="tenant")
    art = grad.knowledge.get(TEAM, done.article["id"])
    assert (art.visibility, art.status) == (Visibility.TENANT, ArticleStatus.PUBLISHED)
    assert grad.graduate(TEAM, wide.id, re_scope="tenant").verdict is Verdict.DEDUPLICATED
    narrow = service.remember(TEAM, "The design review happens on Tuesdays at ten.").memory
    grad.graduate(TEAM, narrow.id)
    with pytest.raises(Conflict) as late:
        grad.graduate(TEAM, narrow.id, re_scope="tenant")
    assert late.value.code == "already_graduated"


def test_grad_001_gate_down_is_503_and_stamps_nothing(
    make_store,  # type: ignore[no-untyped-def]
    embedding_server: EmbeddingServer,
    remote_embedder,  # type: ignore[no-untyped-def]
    alice: Principal,
) -> None:
    service = MemoryService(make_store(), remote_embedder, Limits())
    grad = Graduation(KnowledgeService(service))
    m = service.remember(alice, "Deploys to staging need the VPN.").memory
    embedding_server.down = True
    with pytest.raises(Unavailable) as down:
        grad.graduate(alice, m.id)
    assert down.value.code == "novelty_gate_unavailable"
    assert service.store.memory_usage("t1", m.id) is None
    assert service.store.knowledge_live("t1")[1] == []
    embedding_server.down = False
    assert grad.graduate(alice, m.id).created


def test_grad_001_sweep_graduates_hot_memories_fairly_within_bounds(
    service: MemoryService,
) -> None:
    grad = Graduation(KnowledgeService(service))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    hot: dict[str, list[str]] = {}
    for tenant in ("ta", "tb"):
        who = Principal(tenant, f"key-{tenant}", Role.AGENT, agent_id="agent")
        hot[tenant] = []
        for n in range(4):
            m = service.remember(who, f"Fact {n} of {tenant}: the build cache lives in bucket {n}.")
            for step in range(3):
                service.store.usage_bump(
                    tenant, [m.memory.id], now + timedelta(hours=step), timedelta(seconds=3600)
                )
            hot[tenant].append(m.memory.id)
        cold = service.remember(who, f"A cold fact of {tenant}.").memory
        service.store.usage_bump(tenant, [cold.id], now, timedelta(seconds=3600))
    report = grad.sweep(max_per_run=3)
    assert report["graduated"] + report["deduplicated"] == 3 and report["tenants"] == 2
    stamped = {
        t: [i for i in ids if service.store.memory_usage(t, i).graduated_at is not None]
        for t, ids in hot.items()
    }
    assert sorted(len(v) for v in stamped.values()) == [1, 2]  # turns between tenants
    rest = grad.sweep(max_per_run=50)
    assert rest["graduated"] + rest["deduplicated"] == 5
    assert grad.sweep()["tenants"] == 0  # nothing left; cold memories never graduate
    (article,) = [
        a for a, _ in service.store.knowledge_live("ta")[1] if a.memory_id == hot["ta"][0]
    ]
    assert (article.visibility, article.owner) == (Visibility.OWNER, "agent")


def test_recall_006_at_most_max_bumps_memories_per_batch(
    service: MemoryService, alice: Principal
) -> None:
    """The bump cap of a batch (200 by default; 2 here): every relevant hit is an event, only
    the first ``max_bumps`` memories' counts rise."""
    rec = _recorder(service, Clock(), max_bumps=2)
    ids = [
        service.remember(alice, text).memory.id
        for text in (
            "The staging deploy needs the VPN switched on.",
            "Staging deploys need the VPN to be switched on.",
            "Switch the VPN on before the staging deploy.",
        )
    ]
    hits = service.recall(alice, "does the staging deploy need the VPN switched on?", k=3)
    assert {h.memory.id for h in hits.results} == set(ids)
    rec.flush()
    relevant = [e for i in ids for e in service.store.usage_events("t1", i) if e.relevant]
    assert len(relevant) == 3
    counted = [i for i in ids if service.store.memory_usage("t1", i) is not None]
    assert len(counted) == 2
    rec.close()


def test_grad_001_sweep_scans_at_most_scan_limit_tenants_and_no_tenant_starves(
    service: MemoryService,
) -> None:
    """``scan_limit`` bounds the tenants one run looks at; a busy tenant's many hot memories
    never take the run's budget from a quiet tenant's one (turns between tenants)."""
    grad = Graduation(KnowledgeService(service))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    counts = {"busy": 5, "quiet": 1, "third": 1}
    for tenant, n in counts.items():
        who = Principal(tenant, f"key-{tenant}", Role.AGENT, agent_id="agent")
        for i in range(n):
            m = service.remember(who, f"Fact {i} of the {tenant} team: deploys use cache {i}.")
            for step in range(3):
                service.store.usage_bump(
                    tenant, [m.memory.id], now + timedelta(hours=step), timedelta(seconds=3600)
                )
    bounded = grad.sweep(max_per_run=2, scan_limit=2)
    assert bounded["tenants"] == 2 and bounded["graduated"] == 2  # "busy" and "quiet" by name
    assert bounded["scanned"] <= 2 * 2  # each tenant's queue: ceil(2 x 2 / 2) memories
    per = {
        t: sum(1 for a, _ in service.store.knowledge_live(t)[1] if a.source == "graduated")
        for t in counts
    }
    assert per == {"busy": 1, "quiet": 1, "third": 0}, per
    rest = grad.sweep(max_per_run=50, scan_limit=500)
    assert rest["graduated"] == 5 and rest["tenants"] == 2  # "busy" and "third" still hot
