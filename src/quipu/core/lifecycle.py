"""The status transition table (LIFE-1). Pure.

Two kinds of move sit outside an owner's reach even when the table allows them (the use cases
check who asks, :mod:`quipu.memories` and :mod:`quipu.governance`):

- leaving ``candidate``, ``quarantined`` or ``rejected`` for anything but ``unavailable`` is a
  review (LIFE-5, LIFE-6): a reviewer, a reason, and never the writer of that version;
- ``erased`` is reached only by the erase operation (LIFE-4), from any status, and nothing
  follows it.
"""

from __future__ import annotations

from quipu.core.records import Status
from quipu.errors import Conflict

S = Status

#: Allowed moves from each status. Anything else is a 409 ``illegal_transition``.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    S.CANDIDATE: frozenset({S.ACTIVE, S.REJECTED, S.ARCHIVED, S.QUARANTINED, S.UNAVAILABLE}),
    S.ACTIVE: frozenset(
        {
            S.STALE,
            S.CONFLICTED,
            S.SUPERSEDED,
            S.EXPIRED,
            S.ARCHIVED,
            S.QUARANTINED,
            S.UNAVAILABLE,
            S.REJECTED,
        }
    ),
    S.STALE: frozenset({S.ACTIVE, S.SUPERSEDED, S.EXPIRED, S.ARCHIVED, S.UNAVAILABLE, S.REJECTED}),
    S.CONFLICTED: frozenset(
        {S.ACTIVE, S.SUPERSEDED, S.ARCHIVED, S.QUARANTINED, S.UNAVAILABLE, S.REJECTED}
    ),
    S.SUPERSEDED: frozenset({S.ACTIVE, S.ARCHIVED, S.UNAVAILABLE}),
    S.EXPIRED: frozenset({S.ACTIVE, S.ARCHIVED, S.UNAVAILABLE}),
    S.ARCHIVED: frozenset({S.ACTIVE, S.UNAVAILABLE}),
    S.QUARANTINED: frozenset({S.ACTIVE, S.REJECTED, S.ARCHIVED, S.UNAVAILABLE}),
    S.REJECTED: frozenset({S.ACTIVE, S.ARCHIVED, S.UNAVAILABLE}),
    S.UNAVAILABLE: frozenset(),
    S.ERASED: frozenset(),
}

#: Statuses that count against the live-row quota (MEM-5) and block an exact duplicate (MEM-6).
LIVE: frozenset[Status] = frozenset({S.CANDIDATE, S.ACTIVE, S.STALE, S.CONFLICTED, S.QUARANTINED})

#: Statuses an ordinary read may return when asked; never forgotten, quarantined or erased
#: (LIFE-3, LIFE-4, LIFE-6).
READABLE: frozenset[Status] = frozenset(Status) - {S.UNAVAILABLE, S.QUARANTINED, S.ERASED}

#: A family whose current version has one of these is left out of ``as_of`` reads, whatever
#: version was valid then: forgotten, quarantined, awaiting review, turned down or erased.
HIDDEN: frozenset[Status] = frozenset(
    {S.UNAVAILABLE, S.QUARANTINED, S.CANDIDATE, S.REJECTED, S.ERASED}
)

#: Leaving these (for anything but ``unavailable``) is a review by someone else (LIFE-5, 6).
REVIEWED: frozenset[Status] = frozenset({S.CANDIDATE, S.QUARANTINED, S.REJECTED})

#: Statuses a reviewer's queue holds (LIFE-5, LIFE-6).
QUEUED: frozenset[Status] = frozenset({S.CANDIDATE, S.QUARANTINED})

#: Statuses no version can change from: forgotten and erased families are final.
FINAL: frozenset[Status] = frozenset({S.UNAVAILABLE, S.ERASED})


def check_transition(current: Status, target: Status) -> None:
    """Raise a 409 unless ``current -> target`` is in the table. Same-status is not a move."""
    if target not in TRANSITIONS[current]:
        raise Conflict(
            f"a memory in status {current.value!r} cannot become {target.value!r}",
            code="illegal_transition",
            details={"from": current.value, "to": target.value},
        )


def is_review(current: Status, target: Status) -> bool:
    """Whether ``current -> target`` needs a reviewer (see the module docstring)."""
    if target is S.REJECTED:
        return True
    return current in REVIEWED and target not in (current, S.UNAVAILABLE)


def can_revise(current: Status) -> bool:
    """Text can change on any status that is not final."""
    return current not in FINAL
