"""Corroboration (CONSOL-3, issue 22): an unverified memory (promoted, extracted) becomes
verified when an independent source states it again — an explicit write by another agent, or
a statement from another session — in the same words (the exact duplicate a write finds) or in
near-identical meaning: a live memory of the same scope partition and project whose cosine to
the new write is at least :data:`NEAR_CORROBORATION`. Each corroboration is a new version
(relation ``judges``, verdict ``corroborated``, the cosine in its reason), audited by the store
in the same transaction like every version."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from quipu.core.auth import Actor
from quipu.core.governance import corroboration
from quipu.core.query import Filters
from quipu.core.records import (
    MemoryVersion,
    Principal,
    ScopeRef,
    Source,
    Status,
    Trust,
    WriteResult,
)
from quipu.errors import Conflict
from quipu.storage.base import Store, Vector

#: Cosine (bundled model) at or above which a write restates a memory closely enough to
#: corroborate it. Measured on the 80 labelled LoCoMo pairs of
#: tests/data/corroboration_pairs.json by :mod:`quipu.evals.corroboration` (best accuracy
#: 0.875; docs/governance.md, "Corroboration").
NEAR_CORROBORATION = 0.388
#: Nearest neighbours a write looks at for near duplicates to corroborate.
NEAR_CANDIDATES = 5
#: The sources whose rows start unverified: the only ones a near duplicate can corroborate.
UNVERIFIED_SOURCES = frozenset({Source.PROMOTED, Source.EXTRACTED, Source.HARVESTED})


def corroborate(
    store: Store,
    clock: Callable[[], datetime],
    quota: int,
    principal: Principal,
    ref: ScopeRef,
    existing: MemoryVersion,
    written: MemoryVersion,
    similarity: float | None = None,
) -> MemoryVersion:
    """``existing``, verified on a new version when ``written`` corroborates it; as it is when
    it does not, or when it moved meanwhile."""
    change = corroboration(existing, written, principal, clock(), similarity)
    if change is None:
        return existing
    try:
        return store.append(
            ref, existing.id, change, existing.version, None, None, clock(), quota,
            by=Actor.of(principal),
        )  # fmt: skip
    except Conflict:
        return existing


def corroborate_near(
    store: Store,
    clock: Callable[[], datetime],
    quota: int,
    principal: Principal,
    ref: ScopeRef,
    result: WriteResult,
    vector: Vector | None,
    threshold: float = NEAR_CORROBORATION,
) -> MemoryVersion:
    """Verify each unverified live memory of the written memory's partition and project that
    it restates in near-identical meaning, when it is an independent source for it. Two
    statements from different sessions corroborate each other: an unverified written memory
    is verified too (a promotion may supersede the older one with it next, and the trust must
    survive that). Answers the written memory as it is after."""
    written = result.memory
    if vector is None or written.status is not Status.ACTIVE:
        return written
    flt = Filters(
        statuses=frozenset({Status.ACTIVE}), sources=UNVERIFIED_SOURCES, project=written.project
    )
    found, _ = store.vector_candidates(ref, vector, flt, NEAR_CANDIDATES)
    near = {c.key: c.score for c in found if c.score >= threshold}
    for key, existing in store.load(list(near)).items():
        if existing.id == written.id or existing.trust is not Trust.UNVERIFIED:
            continue
        if not existing.is_current or existing.project != written.project:
            continue
        after = corroborate(store, clock, quota, principal, ref, existing, written, near[key])
        if after is not existing and written.trust is Trust.UNVERIFIED:  # symmetric (sessions)
            written = corroborate(store, clock, quota, principal, ref, written, existing, near[key])
    return written
