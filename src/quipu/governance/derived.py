"""What later planes derive from a memory, and how an erase reaches it (LIFE-4).

An erase removes a family's content, and with it what other planes made of that content: the
knowledge articles graduated from it and its usage rows today, graph facts when that plane
lands. Each plane contributes one *derived eraser* to :data:`DERIVED_ERASERS`: a factory that,
given the store, answers ``eraser(tenant_id, memory_ids, erasure) -> {table: rows}``.

Both erase paths (:meth:`~quipu.governance.erasure.Erasing.erase` and the subject erasure job)
call every eraser *before* the families themselves are erased, after the legal holds were
checked: a crash in between leaves the memory live and the erase can simply run again, so an
eraser must be idempotent (the second call finds nothing and counts 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quipu.core.auth import AuditEvent
from quipu.core.governance import Erasure
from quipu.core.knowledge import article_tombstone
from quipu.storage.base import Store

DerivedEraser = Callable[[str, Sequence[str], Erasure], dict[str, int]]
"""``eraser(tenant_id, memory_ids, erasure)``: remove what one plane derived from these memory
families; rows removed or wiped, per table."""


def graduated_articles(store: Store) -> DerivedEraser:
    """Every article graduated from one of the memories (any of its versions names the
    memory) loses every version's content and keeps a tombstone, as a knowledge erase does;
    one ``knowledge.erase`` audit line each, naming the memory it came from."""

    def erase(tenant_id: str, memory_ids: Sequence[str], erasure: Erasure) -> dict[str, int]:
        erased = 0
        for article in store.knowledge_by_memory(tenant_id, memory_ids):
            if not store.knowledge_erase(article_tombstone(article, erasure.by.key_id, erasure.at)):
                continue  # erased by someone else meanwhile
            erased += article.version
            by = erasure.by
            store.record_audit(
                AuditEvent(
                    tenant_id=tenant_id,
                    at=erasure.at,
                    actor_key=by.key_id,
                    surface=by.surface,
                    action="knowledge.erase",
                    target_ids=(article.id,),
                    role=by.role,
                    agent_id=by.agent_id,
                    user_id=by.user_id,
                    reason=erasure.reason,
                    details={"derived_from": article.memory_id},
                )
            )
        return {"knowledge_versions": erased}

    return erase


def usage_rows(store: Store) -> DerivedEraser:
    """The memories' usage events, recall counters and graduation stamps are deleted."""

    def erase(tenant_id: str, memory_ids: Sequence[str], erasure: Erasure) -> dict[str, int]:
        return store.usage_erase(tenant_id, memory_ids)

    return erase


#: The hook point: one factory per plane that derives data from memories. A new plane (the
#: graph's facts) appends its factory here; every erase path then calls it.
DERIVED_ERASERS: tuple[Callable[[Store], DerivedEraser], ...] = (graduated_articles, usage_rows)


def derived_erasers(store: Store) -> list[DerivedEraser]:
    return [factory(store) for factory in DERIVED_ERASERS]
