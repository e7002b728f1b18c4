"""Durable jobs (JOB-1, JOB-2): rows with a lease, a fencing token and bounded retries. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})


@dataclass(frozen=True)
class NewJob:
    tenant_id: str
    kind: str
    idempotency_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = 5


@dataclass(frozen=True)
class Job:
    job_id: str
    tenant_id: str
    kind: str
    idempotency_key: str
    payload: dict[str, Any]
    status: JobStatus
    attempts: int
    max_attempts: int
    run_after: datetime
    created_at: datetime
    updated_at: datetime
    fencing_token: int = 0
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    checkpoint: dict[str, Any] = field(default_factory=dict)
    last_error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    finished_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        def iso(v: datetime | None) -> str | None:
            return None if v is None else v.isoformat()

        return {
            "job_id": self.job_id,
            "tenant_id": self.tenant_id,
            "kind": self.kind,
            "idempotency_key": self.idempotency_key,
            "status": self.status.value,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "run_after": iso(self.run_after),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "fencing_token": self.fencing_token,
            "lease_owner": self.lease_owner,
            "lease_expires_at": iso(self.lease_expires_at),
            "checkpoint": self.checkpoint,
            "last_error": self.last_error,
            "result": self.result,
            "finished_at": iso(self.finished_at),
        }


def backoff(attempts: int, base: float = 2.0, cap: float = 300.0) -> timedelta:
    """Exponential backoff after the n-th failed attempt: 2 s, 4 s, 8 s … at most 5 min."""
    return timedelta(seconds=min(cap, base ** max(1, attempts)))
