"""The status transition table (LIFE-1). Pure."""

from __future__ import annotations

from quipu.core.records import Status
from quipu.errors import Conflict

S = Status

#: Allowed moves from each status. Anything else is a 409 ``illegal_transition``.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    S.CANDIDATE: frozenset({S.ACTIVE, S.ARCHIVED, S.QUARANTINED, S.UNAVAILABLE}),
    S.ACTIVE: frozenset(
        {S.STALE, S.CONFLICTED, S.SUPERSEDED, S.EXPIRED, S.ARCHIVED, S.QUARANTINED, S.UNAVAILABLE}
    ),
    S.STALE: frozenset({S.ACTIVE, S.SUPERSEDED, S.EXPIRED, S.ARCHIVED, S.UNAVAILABLE}),
    S.CONFLICTED: frozenset({S.ACTIVE, S.SUPERSEDED, S.ARCHIVED, S.QUARANTINED, S.UNAVAILABLE}),
    S.SUPERSEDED: frozenset({S.ACTIVE, S.ARCHIVED, S.UNAVAILABLE}),
    S.EXPIRED: frozenset({S.ACTIVE, S.ARCHIVED, S.UNAVAILABLE}),
    S.ARCHIVED: frozenset({S.ACTIVE, S.UNAVAILABLE}),
    S.QUARANTINED: frozenset({S.ACTIVE, S.ARCHIVED, S.UNAVAILABLE}),
    S.UNAVAILABLE: frozenset(),
}

#: Statuses that count against the live-row quota (MEM-5) and block an exact duplicate (MEM-6).
LIVE: frozenset[Status] = frozenset({S.CANDIDATE, S.ACTIVE, S.STALE, S.CONFLICTED, S.QUARANTINED})

#: Statuses an ordinary read may return when asked; never unavailable or quarantined (LIFE-3, 6).
READABLE: frozenset[Status] = frozenset(Status) - {S.UNAVAILABLE, S.QUARANTINED}


def check_transition(current: Status, target: Status) -> None:
    """Raise a 409 unless ``current -> target`` is in the table. Same-status is not a move."""
    if target not in TRANSITIONS[current]:
        raise Conflict(
            f"a memory in status {current.value!r} cannot become {target.value!r}",
            code="illegal_transition",
            details={"from": current.value, "to": target.value},
        )


def can_revise(current: Status) -> bool:
    """Text can change on any status that is not final."""
    return current is not S.UNAVAILABLE
