"""Concurrency through the service (MEM-5, LIFE-2): threads on one store, processes on one file."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.core.scopes import resolve_scope
from quipu.errors import Conflict, LimitExceeded
from quipu.memories import MemoryService


def test_mem_005_parallel_writers_never_exceed_quota(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(make_store(), local_embedder, Limits(quota_per_owner=25))
    outcomes: list[str] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        for i in range(10):
            try:
                svc.remember(alice, f"writer {n} fact {i}")
                result = "ok"
            except LimitExceeded:
                result = "quota"
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 25 and outcomes.count("quota") == 35
    assert svc.store.count_live(resolve_scope(alice, "agent")) == 25
    assert len(svc.list(alice, limit=200).items) == 25


def test_life_002_two_concurrent_revises_one_conflicts(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(make_store(), local_embedder, Limits())
    m = svc.remember(alice, "the meeting is at 10").memory
    barrier = threading.Barrier(2)
    results: list[str] = []

    def revise(text: str) -> None:
        barrier.wait()
        try:
            svc.revise(alice, m.id, text, expected_version=1)
            results.append("ok")
        except Conflict as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=revise, args=(t,)) for t in ("at 11", "at 12")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["ok", "version_conflict"]
    history = svc.history(alice, m.id)
    assert [v.version for v in history] == [1, 2]


def _process_writer(path: str, start: int, quota: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from quipu.core.limits import Limits
    from quipu.core.records import Principal, Role
    from quipu.memories import MemoryService
    from quipu.storage.sqlite.store import SQLiteStore

    who = Principal("t1", "key-alice", Role.AGENT, agent_id="alice")
    svc = MemoryService(SQLiteStore(path), None, Limits(quota_per_owner=quota))
    ok = 0
    for i in range(start, start + 20):
        try:
            svc.remember(who, f"process fact {i}")
            ok += 1
        except LimitExceeded:
            pass
    svc.store.close()
    out.put(ok)


@pytest.mark.skipif(sys.platform != "linux", reason="uses fork")
def test_mem_005_quota_holds_across_processes_on_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    from quipu.storage.sqlite.store import SQLiteStore

    SQLiteStore(path).close()
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_process_writer, args=(path, n * 100, 30, out)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert sum(out.get(timeout=5) for _ in procs) == 30
    store = SQLiteStore(path)
    from quipu.core.records import Principal, Role

    who = Principal("t1", "key-alice", Role.AGENT, agent_id="alice")
    assert store.count_live(resolve_scope(who, "agent")) == 30
    store.close()


def _limited_writer(path: str, start: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from quipu.auth.ratelimit import SharedRateLimiter
    from quipu.core.limits import Limits
    from quipu.core.records import Principal, Role
    from quipu.memories import MemoryService
    from quipu.storage.sqlite.store import SQLiteStore

    store = SQLiteStore(path)
    who = Principal("t1", "key-alice", Role.AGENT, agent_id="alice")
    svc = MemoryService(store, None, Limits(), limiter=SharedRateLimiter(store, 0.001, 10))
    admitted = 0
    for i in range(start, start + 15):
        try:
            svc.remember(who, f"limited fact {i}")
            admitted += 1
        except LimitExceeded as exc:
            assert exc.code == "rate_limited" and exc.retry_after and exc.retry_after > 0
    store.close()
    out.put(admitted)


@pytest.mark.skipif(sys.platform != "linux", reason="uses fork")
def test_mem_005_rate_limit_is_shared_across_processes(tmp_path: Path) -> None:
    from quipu.storage.sqlite.store import SQLiteStore

    path = str(tmp_path / "rate.db")
    SQLiteStore(path).close()
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_limited_writer, args=(path, n * 100, out)) for n in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert sum(out.get(timeout=5) for _ in procs) == 10


class _CountingEmbedder:
    """The real embedder, counting how many query embeddings run at once (each held for a
    moment, so that recalls allowed to overlap do)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id, self.dimension = inner.model_id, inner.dimension
        self.running = self.most = 0
        self.lock = threading.Lock()

    def embed_batch(self, texts: Any) -> Any:
        return self.inner.embed_batch(texts)

    def embed_query(self, text: str) -> Any:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.02)
            return self.inner.embed_query(text)
        finally:
            with self.lock:
                self.running -= 1


@pytest.mark.parametrize("slots", [1, 3])
def test_recall_concurrency_bounds_the_recalls_running_at_once(
    make_store, local_embedder, alice: Principal, slots: int
) -> None:  # type: ignore[no-untyped-def]
    counting = _CountingEmbedder(local_embedder)
    svc = MemoryService(make_store(), counting, Limits(recall_concurrency=slots))
    svc.remember(alice, "Dana prefers window seats")
    barrier = threading.Barrier(6)

    def reader(n: int) -> None:
        barrier.wait()
        for i in range(3):
            assert svc.recall(alice, f"where does Dana sit? {n} {i}").results

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counting.most == slots  # six readers, never more than the slots, and all of them


def test_recall_concurrency_defaults_to_the_cores_each_worker_process_has() -> None:
    from quipu.composition import load_settings

    def slots(cpus: int, embedded: bool = True, **values: Any) -> int | None:
        settings = load_settings(values, environ={})
        return Limits.from_settings(settings, cpus=cpus, embedded=embedded).recall_concurrency

    assert slots(2) == 2 and slots(2, workers=2) == 1 and slots(8, workers=3) == 2
    assert slots(1, workers=4) == 1  # never zero
    assert slots(2, workers=2, recall_concurrency=4) == 4  # an explicit setting wins
    assert slots(2, embedded=False) is None  # PostgreSQL: bounded by its connection pool
    assert slots(2, embedded=False, recall_concurrency=3) == 3


@pytest.mark.parametrize("slots", [1, 2])
def test_keyword_search_runs_beside_the_embedding_only_with_cores_to_spare(
    make_store, local_embedder, alice: Principal, slots: int
) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(make_store(), local_embedder, Limits(recall_concurrency=slots))
    svc.remember(alice, "Dana prefers window seats")
    searched_in: list[str] = []
    search = svc.store.text_candidates

    def recording(*args: Any, **kwargs: Any) -> Any:
        searched_in.append(threading.current_thread().name)
        return search(*args, **kwargs)

    svc.store.text_candidates = recording  # type: ignore[method-assign]
    assert svc.recall(alice, "where does Dana sit?").results
    # one core per recall: inline, in the caller's thread; more: on a search thread
    assert (
        searched_in[0] == threading.current_thread().name
        if slots == 1
        else (searched_in[0].startswith("quipu-search"))
    )
    svc.close()


def test_serve_runs_two_workers_by_default_on_two_or_more_cpus() -> None:
    import os

    from quipu.composition import load_settings, serve_settings

    default = load_settings({}, environ={})
    assert default.workers is None  # the library is one process; serve decides
    assert serve_settings(default).workers == min(2, os.cpu_count() or 1)
    assert serve_settings(load_settings({"workers": 3}, environ={})).workers == 3
    assert serve_settings(load_settings({}, environ={"QUIPU_WORKERS": "1"})).workers == 1
    # what each of two workers on two CPUs then runs: one recall at a time
    assert Limits.from_settings(serve_settings(default), cpus=2).recall_concurrency == (
        1 if serve_settings(default).workers == 2 else 2
    )
    assert Limits.from_settings(default, cpus=2).recall_concurrency == 2  # the library
