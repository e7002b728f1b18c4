"""Workers in separate processes share one queue safely (JOB-1): no job runs twice, and a
worker killed with SIGKILL mid-job loses nothing — its lease expires and another finishes it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from quipu.core.jobs import JobStatus, NewJob
from quipu.jobs.queue import JobQueue, Lease
from quipu.jobs.worker import Worker
from quipu.storage.sqlite.store import SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses fork and SIGKILL")


def _open(db: str) -> Any:
    if not db.endswith(".db"):  # a PostgreSQL conninfo for a fresh schema
        from quipu.storage.postgres.store import PostgresStore

        return PostgresStore(db, max_connections=2)
    return SQLiteStore(db)


@pytest.fixture(params=["sqlite", "postgres", pytest.param("citus", marks=pytest.mark.citus)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A store location every process can open: a file, or a fresh PostgreSQL schema (on Citus,
    migrated by ``quipu migrate --citus``)."""
    if request.param == "sqlite":
        yield str(tmp_path / "q.db")
        return
    from tests.conftest import CITUS_URL, PG_URL, schema_url

    if request.param == "citus":
        if CITUS_URL is None:
            pytest.skip("needs QUIPU_TEST_CITUS_URL (make test sets it)")
        pool = request.getfixturevalue("citus_schemas")
        url = pool.take()
        yield url
        pool.give_back(url)
        return
    from tests.support.pg import drop_schema, new_schema

    if PG_URL is None:
        pytest.skip("needs QUIPU_TEST_DATABASE_URL (make test sets it)")
    name = new_schema(PG_URL, f"w_{uuid.uuid4().hex[:12]}")
    yield schema_url(PG_URL, name)
    drop_schema(PG_URL, name)


def _work(db: str, log: str, lease_s: float, sleep_s: float, rounds: int) -> None:
    store = _open(db)
    queue = JobQueue(store, lease=timedelta(seconds=lease_s))

    def handler(lease: Lease) -> dict[str, Any]:
        with open(log, "a") as fh:
            fh.write(f"start {lease.job.idempotency_key} {os.getpid()}\n")
        time.sleep(sleep_s)
        with open(log, "a") as fh:
            fh.write(f"done {lease.job.idempotency_key} {os.getpid()}\n")
        return {"pid": os.getpid()}

    worker = Worker(queue, {"work": handler}, name=f"w{os.getpid()}")
    for _ in range(rounds):
        if worker.run_once() is None:
            time.sleep(0.05)
    store.close()


def test_job_001_two_processes_never_run_a_job_twice(db: str, tmp_path: Path) -> None:
    log = str(tmp_path / "log.txt")
    store = _open(db)
    queue = JobQueue(store)
    for i in range(40):
        queue.enqueue(NewJob("t", "work", f"job-{i}"))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_work, args=(db, log, 60, 0.05, 60)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    done = [
        line.split()[1] for line in Path(log).read_text().splitlines() if line.startswith("done")
    ]
    assert sorted(done) == sorted(f"job-{i}" for i in range(40))
    pids = {line.split()[2] for line in Path(log).read_text().splitlines()}
    assert len(pids) == 2, "both workers should have taken jobs"
    assert {j.status for j in store.list_jobs("t", None, 100)} == {JobStatus.SUCCEEDED}
    store.close()


def test_job_001_sigkill_mid_job_loses_nothing(db: str, tmp_path: Path) -> None:
    log = str(tmp_path / "log.txt")
    store = _open(db)
    job, _ = JobQueue(store).enqueue(NewJob("t", "work", "the-job"))
    ctx = multiprocessing.get_context("spawn")
    victim = ctx.Process(target=_work, args=(db, log, 1.0, 60.0, 1))
    victim.start()
    deadline = time.monotonic() + 30
    while not (Path(log).exists() and "start" in Path(log).read_text()):
        assert time.monotonic() < deadline, "the first worker never started the job"
        time.sleep(0.05)
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(10)
    held = store.get_job(job.job_id)
    assert held is not None and held.status is JobStatus.RUNNING and held.attempts == 1
    time.sleep(1.2)  # the dead worker's lease runs out
    rescuer = ctx.Process(target=_work, args=(db, log, 30.0, 0.0, 5))
    rescuer.start()
    rescuer.join(60)
    assert rescuer.exitcode == 0
    final = store.get_job(job.job_id)
    assert final is not None and final.status is JobStatus.SUCCEEDED and final.attempts == 2
    lines = Path(log).read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "start", "done"]
    assert final.result == {"pid": int(lines[-1].split()[2])} and lines[-1].split()[2] != str(
        victim.pid
    )
    store.close()
