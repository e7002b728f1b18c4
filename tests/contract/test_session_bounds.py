"""Session turns are bounded and rate-limited, race-free, through real stores (issue 20 #8;
SESSION-1, MEM-5): turns per session, bytes per subject, the write rate limit."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quipu.auth.ratelimit import SharedRateLimiter
from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal
from quipu.core.sessions import SessionBounds, SessionKey, Watermark, session_owner
from quipu.errors import LimitExceeded
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.memories import MemoryService
from quipu.sessions import SessionConfig, SessionService

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
KB = 1024


class Clock:
    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def _sessions(store: Any, clock: Clock, **bounds: int) -> SessionService:
    config = SessionConfig(ttl=timedelta(hours=1), bounds=SessionBounds(**bounds))
    return SessionService(store, config, clock)


def _refused(call: Any, limit: str) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as err:
        call()
    assert err.value.code == "quota_exceeded" and err.value.details["limit"] == limit
    return err.value


def test_session_001_turns_per_session_are_bounded(make_store, alice: Principal) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #8: a session took any number of turns."""
    store = make_store()
    clock = Clock()
    sessions = _sessions(store, clock, max_turns=3)
    for i in range(3):
        sessions.append(alice, "s1", "user", f"turn {i}")
    _refused(lambda: sessions.append(alice, "s1", "user", "one too many"), "session_max_turns")
    assert [t.seq for t in sessions.history(alice, "s1")] == [1, 2, 3]  # nothing half-written
    sessions.append(alice, "s2", "user", "another session of the same subject")
    # once the turns expire, the session takes turns again (the append prunes them first)
    clock.at += timedelta(hours=2)
    assert sessions.append(alice, "s1", "user", "after expiry").seq >= 1
    for i in range(2):
        sessions.append(alice, "s1", "user", f"more {i}")
    _refused(lambda: sessions.append(alice, "s1", "user", "full again"), "session_max_turns")


def test_session_001_bytes_per_subject_are_bounded(
    make_store, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #8: 200 turns of 100 KB were accepted from one subject; now its sessions hold
    at most ``max_owner_bytes`` together (content and metadata), across sessions."""
    store = make_store()
    clock = Clock()
    sessions = _sessions(store, clock, max_owner_bytes=250 * KB)
    big = "x" * (100 * KB)
    sessions.append(alice, "s1", "user", big)
    sessions.append(alice, "s2", "user", big, metadata={"k": "v"})
    err = _refused(lambda: sessions.append(alice, "s3", "user", big), "session_max_bytes_per_owner")
    assert err.details["held"] == 2 * 100 * KB + 2 + len('{"k": "v"}')
    sessions.append(alice, "s3", "user", "y" * (40 * KB))  # what still fits
    for who in (bob, other_tenant):  # other subjects have their own allowance
        sessions.append(who, "s1", "user", big)
        sessions.append(who, "s2", "user", big)
    # pruning gives the bytes back
    clock.at += timedelta(hours=2)
    assert store.prune_turns(clock.at, 1000) == 7
    sessions.append(alice, "s1", "user", big)
    sessions.append(alice, "s2", "user", big)


def test_session_001_pruning_an_emptied_session_forgets_its_watermark(
    make_store, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """A session id whose turns all expired starts again at seq 1; its old watermark must not
    hide the new turns from the sweep (last_seq would be ahead of them)."""
    store = make_store()
    clock = Clock()
    sessions = _sessions(store, clock)
    for i in range(3):
        sessions.append(alice, "s1", "user", f"turn {i}")
    key = SessionKey("t1", session_owner(alice), "s1")
    store.set_watermark(key, Watermark("f", 3, "promoted", clock.at))
    clock.at += timedelta(hours=2)
    assert store.prune_turns(clock.at, 1000) == 3
    assert store.get_watermark(key) is None
    sessions.append(alice, "s1", "user", "again")
    sessions.append(alice, "s1", "user", "and again")
    later = clock.at + timedelta(minutes=5)
    assert [s.key for s in store.idle_sessions(later, later, 10)] == [key]


def test_session_001_bounds_hold_under_concurrent_appends(make_store, alice: Principal) -> None:  # type: ignore[no-untyped-def]
    """The bounds are checked inside the append's transaction, like the memory quota (MEM-5):
    concurrent appends never pass them."""
    store = make_store()
    sessions = _sessions(store, Clock(), max_turns=25, max_owner_bytes=30 * (KB + 2))
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(session: str, size: int) -> None:
        for _ in range(10):
            try:
                sessions.append(alice, session, "user", "z" * size)
                result = "ok"
            except LimitExceeded as exc:
                result = exc.details["limit"]
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=write, args=("one", 8)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 25 and outcomes.count("session_max_turns") == 35
    assert [t.seq for t in sessions.history(alice, "one")] == list(range(1, 26))
    # bytes across sessions of one subject, written at once from several threads
    other = Principal("t1", "key-x", alice.role, agent_id="x", user_id="u-x")
    outcomes.clear()

    def write_other(session: str) -> None:
        for _ in range(10):
            try:
                sessions.append(other, session, "user", "w" * KB)
                result = "ok"
            except LimitExceeded as exc:
                result = exc.details["limit"]
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=write_other, args=(f"s{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 30
    assert outcomes.count("session_max_bytes_per_owner") == 30


def test_mem_005_session_appends_take_the_write_rate_limit(
    make_store, local_embedder, alice: Principal, bob: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 20 #8: turns were accepted from a token already rate-limited for writes. Appends
    take a token of the same per-key bucket as memory writes: 429 ``rate_limited`` with a
    Retry-After."""
    s = load_settings({"database": "unused.db"}, environ={})
    service = MemoryService(make_store(), local_embedder)
    rt = build_runtime(s, service, extractor=DeterministicExtractor())
    service.limiter = SharedRateLimiter(service.store, 0.001, 5)
    for i in range(3):
        rt.sessions.append(alice, "s1", "user", f"turn {i}")
    service.remember(alice, "a memory in between")
    rt.sessions.append(alice, "s1", "user", "the fifth write")
    with pytest.raises(LimitExceeded) as err:
        rt.sessions.append(alice, "s1", "user", "over the rate")
    assert err.value.code == "rate_limited" and (err.value.retry_after or 0) > 0
    assert len(rt.sessions.history(alice, "s1")) == 4
    with pytest.raises(LimitExceeded):  # the memory write shares the bucket
        service.remember(alice, "another memory")
    rt.sessions.append(bob, "s1", "user", "another key has its own bucket")
    rt.close()


def test_session_001_settings_bound_the_runtime(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """The two bounds are settings (docs/configuration.md) the runtime enforces."""
    s = load_settings(
        {
            "database": "unused.db",
            "session_max_turns": 2,
            "session_max_bytes_per_owner": 1_048_576,
        },
        environ={},
    )
    rt = build_runtime(s, MemoryService(make_store(), local_embedder), extractor=None)
    rt.sessions.append(alice, "s1", "user", "one")
    rt.sessions.append(alice, "s1", "user", "two")
    _refused(lambda: rt.sessions.append(alice, "s1", "user", "three"), "session_max_turns")
    big = "b" * (100 * KB)
    for i in range(10):
        rt.sessions.append(alice, f"big{i}", "user", big)
    _refused(lambda: rt.sessions.append(alice, "big10", "user", big), "session_max_bytes_per_owner")
    with pytest.raises(Exception, match="session_max_bytes_per_owner"):
        load_settings({"session_max_bytes_per_owner": 10}, environ={})
    rt.close()


def test_session_001_migration_counts_existing_turns(make_store, alice: Principal) -> None:  # type: ignore[no-untyped-def]
    """The migration that adds the counters fills them from the turns already stored, and
    names each session's writer as the sweep did until then."""
    store = make_store("legacy.db")
    sessions = _sessions(store, Clock(), max_owner_bytes=250 * KB)
    sessions.append(alice, "s1", "user", "a" * (100 * KB))
    sessions.append(alice, "s2", "user", "b" * (100 * KB))
    sessions.append(alice, "s2", "user", "tail")
    _forget_the_counters(store)
    store.close()
    reopened = make_store("legacy.db")
    again = _sessions(reopened, Clock(), max_owner_bytes=250 * KB)
    _refused(
        lambda: again.append(alice, "s3", "user", "c" * (100 * KB)), "session_max_bytes_per_owner"
    )
    later = NOW + timedelta(minutes=5)
    idle = {s.key.session_id: s.writer for s in reopened.idle_sessions(later, later, 10)}
    assert set(idle) == {"s1", "s2"}
    assert idle["s2"].agent_id == "alice" and idle["s2"].user_id == "u-alice"
    assert idle["s2"].key_id == "promotion-sweep"  # the writer of a turn from before


def _forget_the_counters(store: Any) -> None:
    """Put the store back to the schema before the counters (as an older Quipu left it)."""
    postgres = store.capabilities.backend == "postgres"
    version = 6 if postgres else 7
    with store._tx() as conn:
        conn.execute("DROP TABLE sessions")
        conn.execute("DROP TABLE session_owners")
        conn.execute(f"DELETE FROM schema_migrations WHERE version = {version}")
