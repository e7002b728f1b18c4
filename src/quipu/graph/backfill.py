"""``quipu graph backfill``: read the memories a store already holds into the entity graph
(GRAPH-1), for stores written before the graph existed or while ``graph_extract`` was off.

Every current, active memory of the tenant (or of every tenant), optionally of one scope, is
read by the deterministic extractor and written with
:meth:`~quipu.graph.service.GraphService.observe` in ``fill`` mode: a memory that already has
graph rows is skipped inside the write's own transaction, so the job is idempotent and an
interrupted run is resumed by running it again (each memory is one short transaction; nothing
is held between them). ``progress`` is called every ``every`` memories with the counts so far.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from quipu.core.records import Scope, Status
from quipu.graph.service import GraphService


@dataclass
class BackfillReport:
    """What a backfill did: memories read, mirrored now, already mirrored or naming nothing."""

    memories: int = 0
    written: int = 0
    skipped: int = 0
    entities: int = 0
    facts: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def backfill(
    graph: GraphService,
    tenant_id: str | None,
    *,
    scope: Scope | None = None,
    progress: Callable[[BackfillReport], None] | None = None,
    every: int = 500,
) -> BackfillReport:
    """Mirror every current active memory of ``tenant_id`` (None: all tenants) in ``scope``
    (None: every scope) that has no graph rows yet."""
    report = BackfillReport()
    for memory, _ in graph.store.export_versions(tenant_id):
        if not memory.is_current or memory.status is not Status.ACTIVE:
            continue
        if scope is not None and memory.scope is not scope:
            continue
        report.memories += 1
        wrote = graph.observe(memory, fill=True)
        if wrote is None:
            report.skipped += 1
        else:
            report.written += 1
            report.entities += len(wrote.created)
            report.facts += len(wrote.facts)
        if progress is not None and report.memories % every == 0:
            progress(report)
    return report
