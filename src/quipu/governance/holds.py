"""The one legal-hold check of every erase (LIFE-4).

Every erase path, whatever plane it erases, runs its whole erase inside :func:`under_holds`:
the store's transaction opens, the tenant's active holds are read *inside* it (a hold set
meanwhile waits for the erase to end), and 409 ``legal_hold`` is raised before anything, derived
data included, is touched. The erase's every step then runs in that same transaction, so a
refusal or a crash leaves nothing half erased; once it commits, the store lets erased page
images leave the disk (SQLite checkpoints its WAL).

An erase path is a use case decorated with :func:`erase_path`; the registry
:data:`ERASE_PATHS` is what the hold matrix test walks, and a test fails for any public
``erase*`` method of a plane service that is not in it, so a new plane cannot skip the check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from quipu.core.governance import Hold, HoldKind, subject_of
from quipu.errors import Conflict
from quipu.storage.base import Store

F = TypeVar("F", bound=Callable[..., object])

#: ``module.Class.method`` of every erase path -> the plane it erases (filled by the decorator).
ERASE_PATHS: dict[str, str] = {}


def erase_path(plane: str) -> Callable[[F], F]:
    """Mark a use case as an erase path of ``plane``: it must do its erase in
    :func:`under_holds` (the hold matrix test runs every path so marked)."""

    def mark(fn: F) -> F:
        ERASE_PATHS[f"{fn.__module__}.{fn.__qualname__}"] = plane
        return fn

    return mark


@dataclass(frozen=True)
class Reach:
    """What an erase would remove, as legal holds see it: memory families by id, and the end
    users (subjects) whose data it is. Every erase is also covered by a tenant hold."""

    tenant_id: str
    memory_ids: frozenset[str] = field(default_factory=frozenset)
    subjects: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(
        cls, tenant_id: str, memory_ids: Iterable[str] = (), subjects: Iterable[str | None] = ()
    ) -> Reach:
        return cls(
            tenant_id, frozenset(memory_ids), frozenset(s for s in subjects if s is not None)
        )


def covering(holds: Iterable[Hold], reach: Reach) -> list[Hold]:
    """The active holds that keep an erase of ``reach`` from running: the tenant's, one on any
    of its memories, one on any of its subjects."""
    return [
        h
        for h in holds
        if h.active
        and (
            h.kind is HoldKind.TENANT
            or (h.kind is HoldKind.MEMORY and h.target in reach.memory_ids)
            or (h.kind is HoldKind.SUBJECT and h.target in reach.subjects)
        )
    ]


def held(holds: Iterable[Hold]) -> Conflict:
    return Conflict(
        "a legal hold covers what this erase would remove; nothing was changed",
        code="legal_hold",
        details={"holds": [h.hold_id for h in holds]},
    )


@contextmanager
def under_holds(store: Store, reach: Reach) -> Iterator[None]:
    """Run the block as one erase: refused with 409 ``legal_hold`` (nothing changed) when an
    active hold covers ``reach``, else every store write in the block commits together."""
    with store.transaction(reach.tenant_id):
        if blocking := covering(store.erase_holds(reach.tenant_id), reach):
            raise held(blocking)
        yield
    store.checkpoint()  # after the commit: erased page images leave the WAL (SQLite)


def memory_subjects(store: Store, tenant_id: str, memory_ids: Iterable[str]) -> set[str]:
    """The subjects of the memories (an article graduated from a user's memory is theirs)."""
    subjects = set()
    for ident in memory_ids:
        ref = store.locate(tenant_id, ident)
        if ref is not None and (subject := subject_of(ref)) is not None:
            subjects.add(subject)
    return subjects
