"""The durable queue over a Store (JOB-1): enqueue, claim → heartbeat → complete/fail, with
leases, fencing tokens, bounded retries with backoff, cancel and retry. Nothing is
fire-and-forget: a job is a row until it succeeds, fails for good or is cancelled."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.core.jobs import Job, JobStatus, NewJob, backoff
from quipu.errors import Conflict, NotFound
from quipu.storage.base import Store


class LeaseLost(Conflict):
    """This worker no longer holds the job (its lease expired and another took it)."""

    default_code = "lease_lost"


@dataclass
class Lease:
    """A claimed job and the fencing token that proves the holder."""

    job: Job
    queue: JobQueue
    lost: threading.Event = field(default_factory=threading.Event)

    @property
    def token(self) -> int:
        return self.job.fencing_token

    def heartbeat(self, checkpoint: dict[str, Any] | None = None) -> None:
        if not self.queue.heartbeat(self.job.job_id, self.token, checkpoint):
            self.lost.set()
            raise LeaseLost(f"job {self.job.job_id} was taken over by another worker")


class JobQueue:
    def __init__(
        self,
        store: Store,
        *,
        lease: timedelta = timedelta(seconds=60),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.lease = lease
        self._clock = clock or (lambda: datetime.now(UTC))

    def now(self) -> datetime:
        return self._clock()

    def enqueue(self, job: NewJob) -> tuple[Job, bool]:
        return self.store.enqueue_job(job, self._clock())

    def claim(self, kinds: list[str], worker: str) -> Lease | None:
        now = self._clock()
        job = self.store.claim_job(kinds, worker, now + self.lease, now)
        return None if job is None else Lease(job, self)

    def heartbeat(self, job_id: str, token: int, checkpoint: dict[str, Any] | None = None) -> bool:
        now = self._clock()
        return self.store.heartbeat_job(job_id, token, now + self.lease, checkpoint, now)

    def complete(self, lease: Lease, result: dict[str, Any]) -> None:
        """Refused (LeaseLost) for a stale fencing token: only the current holder finishes."""
        if not self.store.finish_job(
            lease.job.job_id, lease.token, JobStatus.SUCCEEDED, self._clock(), result=result
        ):
            raise LeaseLost(f"job {lease.job.job_id} is no longer held by this worker")

    def fail(self, lease: Lease, error: str, *, retryable: bool = True) -> JobStatus:
        """Retry with backoff while attempts remain, else fail for good. Returns the status."""
        job = lease.job
        now = self._clock()
        if retryable and job.attempts < job.max_attempts:
            status, run_after = JobStatus.QUEUED, now + backoff(job.attempts)
        else:
            status, run_after = JobStatus.FAILED, None
        if not self.store.finish_job(
            job.job_id, lease.token, status, now, error=error[:2000], run_after=run_after
        ):
            raise LeaseLost(f"job {job.job_id} is no longer held by this worker")
        return status

    def defer(self, lease: Lease, until: datetime, reason: str) -> JobStatus:
        """Put the job back in the queue, due at ``until``: not a failure (no error, no
        backoff, and the attempt its claim took is given back, so a scope that stays busy
        never uses up the job's attempts); the result names ``reason``."""
        now = self._clock()
        if not self.store.defer_job(
            lease.job.job_id,
            lease.token,
            now,
            max(until, now),
            {"deferred": reason, "until": until.isoformat()},
        ):
            raise LeaseLost(f"job {lease.job.job_id} is no longer held by this worker")
        return JobStatus.QUEUED

    def cancel(self, job_id: str) -> Job:
        job = self.store.cancel_job(job_id, self._clock())
        if job is None:
            raise NotFound(f"no job {job_id}", details={"job_id": job_id})
        return job

    def retry(self, job_id: str) -> Job:
        job = self.store.retry_job(job_id, self._clock())
        if job is None:
            raise NotFound(f"no job {job_id}", details={"job_id": job_id})
        if job.status is not JobStatus.QUEUED:
            raise Conflict(
                f"job {job_id} is {job.status.value}; only failed or cancelled jobs are retried",
                code="job_not_retryable",
            )
        return job
