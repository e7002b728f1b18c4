"""The `quipu serve --workers N` supervisor's health check (OPS-1; issue 23: an operator whose
worker cannot start waited a minute for `quipu serve` to stop)."""

from __future__ import annotations

import os
import signal
import threading

import uvicorn
from uvicorn.supervisors.multiprocess import Process

from quipu.surfaces.http.workers import answers


def test_ops_001_issue23_the_health_check_ends_when_the_worker_exits_not_at_its_timeout() -> None:
    """A worker that exits while the supervisor's ping waits (a startup failure on its way
    out, an out-of-memory kill) is seen at once. uvicorn's ping waits on the pipe alone, whose
    both ends the supervisor holds, so it ran to the full health-check timeout (60 s): seen
    red with ``process.ping`` in place of ``answers``."""
    config = uvicorn.Config("quipu.surfaces.http.boot:app_from_environment", factory=True)
    worker = Process(config, sockets=[])
    worker.start()
    try:
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGSTOP)  # it cannot answer the ping below
        seen: list[bool] = []
        check = threading.Thread(target=lambda: seen.append(answers(worker, 600.0)), daemon=True)
        check.start()
        threading.Timer(0.5, os.kill, (worker.pid, signal.SIGKILL)).start()
        check.join(120)  # 5x below the timeout; the exit is seen in well under a second
        assert seen == [False]
    finally:
        worker.kill()
        worker.join()
    assert worker.exitcode == -signal.SIGKILL
