"""The entity graph's operator reads on PostgreSQL (a mixin of :class:`PostgresStore`;
GRAPH-1, OPS-4): a scope's entities page by page with their current fact counts, and what one
memory put in the graph. Every statement names ``tenant_id`` (one shard under Citus). Writes
stay in :mod:`quipu.storage.postgres.graph`."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.graph import Entity, Fact
from quipu.core.records import ScopeRef
from quipu.storage.decode import decode_rows
from quipu.storage.postgres.graph import _ENTITY, _FACT, _entity, _fact

_ACTIVE_F = (
    "EXISTS (SELECT 1 FROM memory_versions m WHERE m.tenant_id = f.tenant_id"
    " AND m.id = f.memory_id AND m.is_current AND m.status = 'active')"
)
_NAMED = (
    "EXISTS (SELECT 1 FROM graph_mentions g WHERE g.tenant_id = e.tenant_id AND g.scope = e.scope"
    " AND g.owner = e.owner AND g.entity_id = e.entity_id AND EXISTS (SELECT 1 FROM"
    " memory_versions m WHERE m.tenant_id = g.tenant_id AND m.id = g.memory_id"
    " AND m.is_current AND m.status = 'active'))"
)
#: The counted facts' partition, as constants: under Citus a correlated subquery over the
#: page (a derived table) is routed to the tenant's shard only when it names the tenant itself.
_SAME = "f.tenant_id = %s AND f.scope = %s AND f.owner = %s"


def _count(column: str, extra: str, cap: int) -> str:
    return (
        f"(SELECT count(*) FROM (SELECT 1 FROM graph_facts f WHERE {_SAME} AND f.{column} ="
        f" e.entity_id{extra} AND f.invalid_at IS NULL AND {_ACTIVE_F} LIMIT {cap}) c)"
    )


class GraphReads:
    """Needs the store's ``_conn()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def graph_entity_list(
        self,
        ref: ScopeRef,
        *,
        types: Sequence[str],
        prefix: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
        count_cap: int,
    ) -> list[tuple[Entity, int]]:
        where = ["e.tenant_id = %s AND e.scope = %s AND e.owner = %s"]
        part = (ref.tenant_id, ref.scope.value, ref.owner)
        args: list[object] = list(part)
        if types:
            where.append("e.type = ANY(%s)")
            args.append(list(types))
        if prefix:
            where.append("starts_with(e.folded, %s)")
            args.append(prefix)
        if before is not None:
            where.append("(e.last_seen < %s OR (e.last_seen = %s AND e.entity_id < %s))")
            args.extend((before[0], before[0], before[1]))
        cap = max(1, int(count_cap))
        counted = (
            f"{_count('subject_id', '', cap)} + "
            f"{_count('object_id', ' AND f.subject_id <> e.entity_id', cap)}"
        )
        columns = ", ".join(f"e.{c.strip()}" for c in _ENTITY.split(","))
        with self._conn() as conn:
            rows = conn.execute(
                # the page first, then the counts of its rows only (not of every entity sorted)
                f"SELECT {columns}, {counted} AS facts FROM (SELECT * FROM graph_entities e"
                f" WHERE {' AND '.join(where)} AND {_NAMED}"
                " ORDER BY e.last_seen DESC, e.entity_id DESC LIMIT %s) e"
                " ORDER BY e.last_seen DESC, e.entity_id DESC",
                (*part, *part, *args, limit),
            ).fetchall()
        return decode_rows(lambda r: (_entity(r), int(r[9])), rows, lambda r: r[0])

    def graph_memory_rows(
        self, ref: ScopeRef, memory_id: str, limit: int
    ) -> tuple[list[Entity], list[Fact]]:
        columns = ", ".join(f"e.{c.strip()}" for c in _ENTITY.split(","))
        with self._conn() as conn:
            named = conn.execute(
                f"SELECT {columns} FROM graph_mentions g JOIN graph_entities e ON"
                " e.tenant_id = g.tenant_id AND e.scope = g.scope AND e.owner = g.owner"
                " AND e.entity_id = g.entity_id WHERE g.tenant_id = %s AND g.memory_id = %s"
                " AND g.scope = %s AND g.owner = %s ORDER BY e.name, e.entity_id LIMIT %s",
                (ref.tenant_id, memory_id, ref.scope.value, ref.owner, limit),
            ).fetchall()
            facts = conn.execute(
                f"SELECT {_FACT} FROM graph_facts WHERE tenant_id = %s AND memory_id = %s"
                " AND scope = %s AND owner = %s ORDER BY recorded_at, fact_id LIMIT %s",
                (ref.tenant_id, memory_id, ref.scope.value, ref.owner, limit),
            ).fetchall()
        return (
            decode_rows(_entity, named, lambda r: r[0]),
            decode_rows(_fact, facts, lambda r: r[0]),
        )

    def graph_open_facts(self, ref: ScopeRef, entity_id: str, limit: int) -> list[Fact]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_FACT} FROM graph_facts f WHERE f.tenant_id = %s AND f.scope = %s"
                " AND f.owner = %s AND (f.subject_id = %s OR f.object_id = %s)"
                f" AND f.invalid_at IS NULL AND {_ACTIVE_F}"
                " ORDER BY f.recorded_at DESC, f.fact_id LIMIT %s",
                (ref.tenant_id, ref.scope.value, ref.owner, entity_id, entity_id, limit),
            ).fetchall()
        return decode_rows(_fact, rows, lambda r: r[0])
