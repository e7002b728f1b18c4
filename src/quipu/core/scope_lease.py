"""The per-scope consolidation lease (issue 24, CONSOL-4): one consolidation of a scope at a
time, across workers and processes, and a cooldown between two runs. Pure: both stores keep
the lease as a row and decide with :func:`decide` inside their write transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

HELD = "held"
COOLDOWN = "cooldown"


@dataclass(frozen=True)
class LeaseRow:
    """A scope's lease as stored: who holds it until when, its fencing token, and when the
    last run released it."""

    holder: str | None
    token: int
    expires_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class ScopeLease:
    """The answer to a request for a scope's lease: granted with a fencing token, or refused
    with the reason (``held`` or ``cooldown``) and when to ask again."""

    granted: bool
    token: int = 0
    reason: str | None = None
    retry_at: datetime | None = None


def decide(row: LeaseRow | None, now: datetime, cooldown: timedelta) -> ScopeLease:
    """Grant unless another holder's lease has not expired, or the last run finished less than
    ``cooldown`` ago. A lease whose holder died (expired, never released) is taken over; the
    token goes up, so the dead holder's release no longer counts. A release stamped later than
    ``now`` (another machine's clock ahead of this one) starts no cooldown here: a skewed clock
    never parks a scope."""
    if row is None:
        return ScopeLease(True, 1)
    if row.holder is not None and row.expires_at is not None and row.expires_at > now:
        return ScopeLease(False, row.token, HELD, row.expires_at)
    if row.finished_at is not None and row.finished_at <= now < row.finished_at + cooldown:
        return ScopeLease(False, row.token, COOLDOWN, row.finished_at + cooldown)
    return ScopeLease(True, row.token + 1)
