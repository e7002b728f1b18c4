"""Promotion under rate limits, crashes, odd principals and tiny sessions, through real stores
(issue 20: defects 6, 14 and 15; JOB-1, JOB-2, PROMO-1, PROMO-2, PROMO-5, PROMO-6)."""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quipu.auth.ratelimit import RateLimiter, SharedRateLimiter
from quipu.composition import build_runtime, load_settings
from quipu.core.jobs import JobStatus
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.core.sessions import SessionKey, session_owner
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.errors import LimitExceeded
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.extraction.model import ModelExtractor
from quipu.jobs.promotion import Promoter, PromotionConfig, sweep
from quipu.jobs.queue import JobQueue
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService
from quipu.runtime import Runtime
from quipu.sessions import PROMOTE, SessionConfig, SessionService
from tests.support.counting_chat_server import ChatServer
from tests.support.embedding_server import EmbeddingServer

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)

CHAT = [
    ("user", "I live in Porto and I work as a data engineer at Farfetch."),
    ("assistant", "Nice! How can I help?"),
    ("user", "I prefer vegetarian restaurants, and I'm allergic to peanuts."),
    ("user", "By the way, what's the weather like today?"),
]

#: A session whose own promotion supersedes one of its memories (the senior role replaces the
#: first), so a re-run after a crash meets a superseded row of the same session.
CAREER = [
    ("user", "I work as a data engineer at Farfetch."),
    ("assistant", "Cool."),
    ("user", "I live in Porto and I prefer vegetarian restaurants."),
    ("user", "I work as a senior data engineer at Farfetch now."),
    ("user", "My sister is called Ana and she lives in Lisbon."),
    ("user", "I'm allergic to peanuts."),
]


class Clock:
    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


#: The write budget of the retry test counts fact writes; episodes (issue 24) would need more.
FACTS_ONLY = PromotionConfig(episodes=False)


def _runtime(make_store, local_embedder, **settings: Any) -> Runtime:  # type: ignore[no-untyped-def]
    s = load_settings({"database": "unused.db", **settings}, environ={})
    service = MemoryService(make_store(), local_embedder, Limits())
    return build_runtime(s, service, extractor=DeterministicExtractor())


def _say(
    sessions: SessionService, who: Principal, session: str, turns: list[tuple[str, str]]
) -> None:
    for role, text in turns:
        sessions.append(who, session, role, text)


def _promoted(service: MemoryService, who: Principal, scope: str = "agent_user") -> list[Any]:
    items: list[Any] = []
    for status in ("active", "superseded"):
        items += service.list(
            who, scope=scope, statuses=[status], sources=["promoted"], limit=200
        ).items
    return items


# -- defect 6: background writes never spend a caller's request budget -------------------------


def test_promo_005_job_writes_do_not_spend_the_callers_write_budget(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #6: the promotion job wrote under the requesting key's rate bucket, and every
    refusal was counted as `dropped_quota` while the session was marked promoted."""
    rt = _runtime(make_store, local_embedder)
    _say(rt.sessions, alice, "s1", CHAT)
    rt.service.limiter = SharedRateLimiter(rt.service.store, 0.001, 3)
    job, created = rt.sessions.promote(alice, "s1")
    assert created
    with pytest.raises(LimitExceeded) as err:  # the caller spends its whole budget meanwhile
        for i in range(10):
            rt.service.remember(alice, f"note number {i}")
    assert err.value.code == "rate_limited"
    rt.worker.drain()
    done = rt.queue.store.get_job(job.job_id)
    assert done is not None and done.status is JobStatus.SUCCEEDED
    assert done.result["created"] >= 4 and done.result["dropped_quota"] == 0
    assert len(_promoted(rt.service, alice)) == done.result["created"]
    with pytest.raises(LimitExceeded):  # and the job did not refill or spend it
        rt.service.remember(alice, "one more note")
    rt.close()


def test_promo_005_sweep_jobs_act_as_each_sessions_writer(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #6: sweep promotions of every tenant shared one `promotion-sweep` bucket, so
    all but the first few memories of a sweep were lost."""
    rt = _runtime(make_store, local_embedder)
    carol = Principal("t2", "key-carol", Role.AGENT, agent_id="carol", user_id="u-carol")
    _say(rt.sessions, alice, "a1", CHAT)
    _say(rt.sessions, carol, "c1", CHAT)
    rt.service.limiter = SharedRateLimiter(rt.service.store, 0.001, 2)
    assert sweep(rt.service, timedelta(0), 100, lambda: datetime.now(UTC))["queued"] == 2
    assert rt.worker.drain() == 3  # both promotions, then their embed_pending job
    for who in (alice, carol):
        promoted = _promoted(rt.service, who)
        assert len(promoted) >= 4
        assert {m.provenance.key_id for m in promoted} == {who.key_id}
    rt.close()


def test_job_002_a_transient_refusal_leaves_the_session_to_promote_again(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #6: a rate-limited write was counted as dropped and the session marked
    promoted, so promoting again added nothing. Now the attempt ends as a retry, the watermark
    says so, and the retry writes the session once. Issue 24: a session's writes commit
    together, so the refused attempt leaves none of them (it used to keep the first two)."""
    store = make_store()
    clock = Clock()
    ticks = [0.0]
    limiter = RateLimiter(rate=1.0, burst=2, clock=lambda: ticks[0])
    service = MemoryService(store, local_embedder, Limits(), clock=clock, limiter=limiter)
    queue = JobQueue(store, clock=clock)
    worker = Worker(
        queue,
        {PROMOTE: Promoter(service, DeterministicExtractor(), FACTS_ONLY, clock=clock).handle},
    )
    sessions = SessionService(store, clock=clock)
    _say(sessions, alice, "s1", CHAT)
    job, _ = sessions.promote(alice, "s1")
    worker.drain()
    first = store.get_job(job.job_id)
    assert first is not None and first.status is JobStatus.QUEUED
    assert (first.last_error or "").startswith("rate_limited: refused for now")
    mark = store.get_watermark(SessionKey("t1", session_owner(alice), "s1"))
    assert mark is not None and mark.status == "retry"
    assert _promoted(service, alice) == []  # atomic: nothing of the session was kept
    ticks[0] += 100.0
    service.limiter = RateLimiter(rate=1.0, burst=4, clock=lambda: ticks[0])  # room for all 4
    clock.at += timedelta(seconds=10)  # the backoff is over
    worker.drain()
    done = store.get_job(job.job_id)
    assert done is not None and done.status is JobStatus.SUCCEEDED and done.attempts == 2
    assert done.result["created"] == 4 and done.result["duplicates"] == 0
    texts = Counter(m.text for m in _promoted(service, alice))
    assert len(texts) == 4 and set(texts.values()) == {1}
    mark = store.get_watermark(SessionKey("t1", session_owner(alice), "s1"))
    assert mark is not None and mark.status == "promoted"


# -- defect 14: a crash mid-promotion never makes a second family -------------------------------


class Crash(BaseException):
    """kill -9: no handler runs, no lease is given back, the job stays `running`."""


class CrashingStore:
    """The real store, dying just before its n-th write once armed (memory insert, new
    version, supersede, job heartbeat, watermark, job finish): every point a worker can be
    killed between two committed transactions of a promotion."""

    WRITES = frozenset(
        {"insert", "insert_batch", "append", "supersede", "heartbeat_job", "set_watermark"}
        | {"finish_job"}
    )

    def __init__(self, store: Any) -> None:
        self._store = store
        self._left = 0
        self.crashed = False

    def arm(self, crash_at: int) -> None:
        self._left = crash_at
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in self.WRITES:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._left -= 1
            if self._left == 0:
                self.crashed = True
                raise Crash(name)
            return attr(*args, **kwargs)

        return call


def _worker(store: Any, embedder: Any, clock: Clock) -> Worker:
    service = MemoryService(store, embedder, Limits(), clock=clock)
    queue = JobQueue(store, lease=timedelta(seconds=30), clock=clock)
    return Worker(queue, {PROMOTE: Promoter(service, DeterministicExtractor(), clock=clock).handle})


def _families(service: MemoryService, who: Principal) -> list[tuple[str, str]]:
    return sorted((m.text, m.status.value) for m in _promoted(service, who))


def test_promo_002_a_crash_mid_promotion_never_makes_a_second_family(
    make_store, local_embedder
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #14: after kill -9 of a worker mid-promotion the re-run recreated memories the
    first run had superseded. Crash at every write of the job in turn (each time in a tenant of
    its own); the job, re-leased by another worker once the lease ran out, must leave exactly
    what an uninterrupted run does."""
    store = make_store()
    clock = Clock()
    sessions = SessionService(store, clock=clock)
    crashing = CrashingStore(store)
    doomed, rescuer = (
        _worker(crashing, local_embedder, clock),
        _worker(store, local_embedder, clock),
    )
    reader = MemoryService(store, local_embedder, Limits())

    def subject(n: int) -> Principal:
        return Principal(f"t{n}", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")

    def request(who: Principal) -> None:
        _say(sessions, who, "career", CAREER)
        sessions.promote(who, "career")

    request(subject(0))
    assert rescuer.drain() == 1
    expected = _families(reader, subject(0))
    assert ("User works as a data engineer at Farfetch", "superseded") in expected
    crash_at = 0
    while True:
        crash_at += 1
        who = subject(crash_at)
        request(who)
        crashing.arm(crash_at)
        with contextlib.suppress(Crash):
            doomed.drain()
        if not crashing.crashed:
            break
        (held,) = store.list_jobs(who.tenant_id, None, 10)
        assert held.status is JobStatus.RUNNING, f"crash {crash_at}"
        clock.at += timedelta(seconds=31)  # the dead worker's lease runs out
        assert rescuer.drain() == 1
        (done,) = store.list_jobs(who.tenant_id, None, 10)
        assert done.status is JobStatus.SUCCEEDED and done.attempts == 2, f"crash {crash_at}"
        found = _families(reader, who)
        assert found == expected, f"crash before write {crash_at}"
        assert set(Counter(text for text, _ in found).values()) == {1}
    assert crash_at > 10  # every write of the job was a crash point once


# -- defect 15: markers on every outcome, fair sweeps, user-role principals, the budget -------


def test_job_002_tiny_sessions_get_a_marker_and_never_starve_real_ones(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #15: a 0- or 1-turn session never got a watermark, so every sweep queued it
    again; nearest expiry first, three of them kept a real session from ever being promoted."""
    store = make_store()
    clock = Clock()
    service = MemoryService(store, local_embedder, Limits(), clock=clock)
    sessions = SessionService(store, SessionConfig(ttl=timedelta(days=1)), clock)
    queue = JobQueue(store, clock=clock)
    worker = Worker(
        queue, {PROMOTE: Promoter(service, DeterministicExtractor(), clock=clock).handle}
    )
    for i in range(3):
        sessions.append(alice, f"tiny{i}", "user", "hello", expires_at=NOW + timedelta(hours=2 + i))
    _say(sessions, alice, "real", CHAT)
    clock.at += timedelta(minutes=10)
    for _ in range(2):
        sweep(service, timedelta(minutes=5), 3, clock)
        worker.drain()
    owner = session_owner(alice)
    real = store.get_watermark(SessionKey("t1", owner, "real"))
    assert real is not None and real.status == "promoted"
    assert len(_promoted(service, alice)) >= 4
    for i in range(3):
        tiny = store.get_watermark(SessionKey("t1", owner, f"tiny{i}"))
        assert tiny is not None and tiny.status == "noop" and tiny.last_seq == 1
    assert sweep(service, timedelta(minutes=5), 3, clock)["queued"] == 0


def test_promo_006_the_sweep_takes_turns_across_tenants(make_store, alice: Principal) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #15: the sweep's page, nearest expiry first across all tenants, let one tenant's
    sessions fill it. Each tenant's sessions stay nearest expiry first; tenants take turns."""
    store = make_store()
    clock = Clock()
    sessions = SessionService(store, SessionConfig(ttl=timedelta(days=3)), clock)
    carol = Principal("t2", "key-carol", Role.AGENT, agent_id="carol", user_id="u-carol")
    for i in range(4):
        for text in ("hello", "there"):
            sessions.append(alice, f"a{i}", "user", text, expires_at=NOW + timedelta(hours=4 - i))
    sessions.append(carol, "c0", "user", "hi")
    sessions.append(carol, "c0", "user", "again")
    later = NOW + timedelta(minutes=10)
    page = store.idle_sessions(later, later, 2)
    assert [s.key.tenant_id for s in page] == ["t1", "t2"] and page[0].key.session_id == "a3"
    everything = store.idle_sessions(later, later, 10)
    assert [s.key.session_id for s in everything] == ["a3", "c0", "a2", "a1", "a0"]
    assert {s.writer.key_id for s in everything} == {alice.key_id, carol.key_id}


def test_job_002_an_early_failure_advances_the_marker(
    make_store,
    embedding_server: EmbeddingServer,
    remote_embedder: OpenAICompatEmbedder,
    alice: Principal,
) -> None:  # type: ignore[no-untyped-def]
    """JOB-2, issue 20 #15: a promotion that failed before writing anything (here: the
    embedder is down) left no marker, so every sweep offered the session again. Now the
    failure is marked as a retry, offered again only after a further idle window."""
    store = make_store()
    clock = Clock()
    service = MemoryService(store, remote_embedder, Limits(), clock=clock)
    sessions = SessionService(store, clock=clock)
    queue = JobQueue(store, clock=clock)
    worker = Worker(
        queue, {PROMOTE: Promoter(service, DeterministicExtractor(), clock=clock).handle}
    )
    _say(sessions, alice, "s1", CHAT)
    embedding_server.down = True
    job, _ = sessions.promote(alice, "s1")
    worker.drain()
    failed = store.get_job(job.job_id)
    assert failed is not None and failed.status is JobStatus.QUEUED
    key = SessionKey("t1", session_owner(alice), "s1")
    mark = store.get_watermark(key)
    assert mark is not None and mark.status == "retry" and mark.last_seq == len(CHAT)
    window = timedelta(minutes=30)
    assert store.idle_sessions(clock.at - window, clock.at, 10) == []
    clock.at += window + timedelta(seconds=1)
    assert [s.key for s in store.idle_sessions(clock.at - window, clock.at, 10)] == [key]
    embedding_server.down = False
    worker.drain()
    done = store.get_job(job.job_id)
    assert done is not None and done.status is JobStatus.SUCCEEDED
    assert store.get_watermark(key).status == "promoted"  # type: ignore[union-attr]


def test_promo_001_a_user_role_principal_promotes_into_its_user_scope(
    make_store, local_embedder
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #15: a `user`-role principal (a user, no agent) failed every promotion with
    `subject_unresolvable` for `agent_user`. It promotes into the scope it owns, `user`, on
    request and through the sweep."""
    rt = _runtime(make_store, local_embedder)
    user = Principal("t1", "key-user", Role.USER, user_id="u-9")
    _say(rt.sessions, user, "s1", CHAT)
    job, _ = rt.sessions.promote(user, "s1")
    rt.worker.drain()
    done = rt.queue.store.get_job(job.job_id)
    assert done is not None and done.status is JobStatus.SUCCEEDED, done
    assert done.result["created"] >= 4
    assert len(_promoted(rt.service, user, scope="user")) == done.result["created"]
    rt.sessions.append(user, "s2", "user", "I moved to Braga last month.")
    rt.sessions.append(user, "s2", "assistant", "Noted.")
    assert sweep(rt.service, timedelta(0), 10, lambda: datetime.now(UTC))["queued"] == 1
    rt.worker.drain()
    texts = [m.text for m in _promoted(rt.service, user, scope="user")]
    assert any("Braga" in t for t in texts), texts
    rt.close()


def test_promo_005_the_budget_counts_compiles_not_requests(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #15: a duplicate request for a queued job spent a unit of the model budget, and
    so did a request for an unchanged session. Only a compile that runs is counted."""
    chat = ChatServer()
    extractor = ModelExtractor(base_url=chat.url, model="tiny-chat", timeout=5.0)
    s = load_settings({"database": "unused.db", "model_budget_per_hour": 2}, environ={})
    rt = build_runtime(s, MemoryService(make_store(), local_embedder), extractor=extractor)
    for session in ("a", "b", "c"):
        _say(rt.sessions, alice, session, CHAT[:2])
    rt.sessions.append(alice, "tiny", "user", "hello")
    rt.sessions.promote(alice, "a")
    rt.sessions.promote(alice, "a")  # already queued
    rt.sessions.promote(alice, "tiny")  # nothing to compile
    rt.worker.drain()
    assert chat.calls == 1
    rt.sessions.promote(alice, "a")  # unchanged since its promotion
    rt.worker.drain()
    assert chat.calls == 1
    rt.sessions.promote(alice, "b")
    rt.worker.drain()
    assert chat.calls == 2
    with pytest.raises(LimitExceeded) as err:
        rt.sessions.promote(alice, "c")
    assert err.value.code == "budget_exhausted"
    assert chat.calls == 2
    rt.close()
    extractor.close()
    chat.close()
