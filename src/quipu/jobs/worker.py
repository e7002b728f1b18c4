"""Workers: claim due jobs, run their handler, record the outcome (JOB-1, JOB-2), plus the
periodic scheduler that enqueues sweeps. Embedded mode runs one in a thread; server mode runs
`quipu worker` processes that share the queue safely."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from quipu.core.jobs import JobStatus, NewJob
from quipu.errors import QuipuError
from quipu.jobs.queue import JobQueue, Lease, LeaseLost

log = logging.getLogger("quipu.jobs")

Handler = Callable[[Lease], dict[str, Any]]
#: The tenant of the jobs that serve every tenant (periodic sweeps, the embedding backfill).
SYSTEM_TENANT = "__system__"


class Retryable(QuipuError):
    """A handler failure worth another attempt (after backoff)."""

    transient = True
    default_code = "job_retryable"


class Deferred(QuipuError):
    """A handler that cannot run its job yet (its scope's consolidation lease is held or
    cooling down): the job goes back to the queue, due again at ``until``, with no error
    recorded, and the attempt it was claimed with given back (issue 24: a scope that stays
    busy never uses up the job's attempts)."""

    transient = True
    default_code = "job_deferred"

    def __init__(self, message: str, *, until: datetime, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.until = until


@dataclass(frozen=True)
class Periodic:
    """Enqueue ``kind`` for ``tenant_id`` every ``every``; the idempotency key is the time slot.
    A scheduler enqueues each slot once; several schedulers (one per worker process) share a
    slot's job while it is queued or running."""

    kind: str
    every: timedelta
    tenant_id: str = SYSTEM_TENANT


class Worker:
    def __init__(
        self,
        queue: JobQueue,
        handlers: Mapping[str, Handler],
        *,
        periodic: tuple[Periodic, ...] = (),
        poll: float = 1.0,
        name: str | None = None,
    ) -> None:
        self.queue = queue
        self.handlers = dict(handlers)
        self.periodic = periodic
        self.poll = poll
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._slots: dict[tuple[str, str], int] = {}  # (tenant, kind) -> last slot enqueued

    def schedule(self, now: datetime | None = None) -> int:
        """Enqueue every periodic job whose slot has come; returns how many were new."""
        now = now or self.queue.now()
        created = 0
        for p in self.periodic:
            slot = int(now.timestamp() // p.every.total_seconds())
            if self._slots.get((p.tenant_id, p.kind)) == slot:
                # Enqueued already: the queue only deduplicates against queued or running jobs,
                # so asking again after the job finished would run the slot over and over (it
                # did: the embedded worker ran the four periodic jobs back to back, a core busy
                # and every write waiting on their transactions).
                continue
            _, new = self.queue.enqueue(NewJob(p.tenant_id, p.kind, f"slot:{slot}", max_attempts=1))
            self._slots[(p.tenant_id, p.kind)] = slot
            created += int(new)
        return created

    def run_once(self) -> JobStatus | None:
        """Claim and run one due job. Returns its outcome, or None when nothing was due."""
        lease = self.queue.claim(sorted(self.handlers), self.name)
        if lease is None:
            return None
        handler = self.handlers[lease.job.kind]
        try:
            result = handler(lease)
        except LeaseLost:
            log.warning("lost the lease of job %s; another worker owns it", lease.job.job_id)
            return None
        except Deferred as exc:
            return self.queue.defer(lease, exc.until, exc.code)
        except Retryable as exc:
            return self.queue.fail(lease, f"{exc.code}: {exc.message}")
        except QuipuError as exc:
            return self.queue.fail(lease, f"{exc.code}: {exc.message}", retryable=exc.transient)
        except Exception as exc:
            log.exception("job %s (%s) failed", lease.job.job_id, lease.job.kind)
            return self.queue.fail(lease, f"{type(exc).__name__}: {exc}")
        self.queue.complete(lease, result)
        return JobStatus.SUCCEEDED

    def drain(self, limit: int = 1000) -> int:
        """Run due jobs until none is due (tests, `quipu worker --once`)."""
        done = 0
        while done < limit and self.run_once() is not None:
            done += 1
        return done

    def run_forever(self) -> None:
        while not self._stop.is_set():
            try:
                self.schedule()
                if self.run_once() is None:
                    self._stop.wait(self.poll)
            except Exception:
                log.exception("worker loop error; continuing")
                self._stop.wait(self.poll)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run_forever, name="quipu-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
