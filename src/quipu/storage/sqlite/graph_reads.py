"""The entity graph's operator reads on SQLite (a mixin of :class:`SQLiteStore`; GRAPH-1,
OPS-4): a scope's entities page by page with their current fact counts, and what one memory
put in the graph. Writes stay in :mod:`quipu.storage.sqlite.graph`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from quipu.core.graph import Entity, Fact
from quipu.core.records import ScopeRef
from quipu.storage.decode import decode_rows
from quipu.storage.sqlite.graph import _ENTITY, _FACT, _entity, _fact
from quipu.storage.timecodec import to_micros

#: A fact counts while its source memory's current version is active (as the graph reads).
_ACTIVE_F = (
    "EXISTS (SELECT 1 FROM memory_versions m WHERE m.tenant_id = f.tenant_id"
    " AND m.id = f.memory_id AND m.is_current = 1 AND m.status = 'active')"
)
#: An entity is listed while an active memory names it.
_NAMED = (
    "EXISTS (SELECT 1 FROM graph_mentions g WHERE g.tenant_id = e.tenant_id AND g.scope = e.scope"
    " AND g.owner = e.owner AND g.entity_id = e.entity_id AND EXISTS (SELECT 1 FROM"
    " memory_versions m WHERE m.tenant_id = g.tenant_id AND m.id = g.memory_id"
    " AND m.is_current = 1 AND m.status = 'active'))"
)
_SAME = "f.tenant_id = e.tenant_id AND f.scope = e.scope AND f.owner = e.owner"
#: The highest Unicode code point: ``prefix + _TOP`` bounds a prefix range (binary collation).
_TOP = "\U0010ffff"


def _count(column: str, extra: str, cap: int) -> str:
    return (
        f"(SELECT count(*) FROM (SELECT 1 FROM graph_facts f WHERE {_SAME} AND f.{column} ="
        f" e.entity_id{extra} AND f.invalid_at IS NULL AND {_ACTIVE_F} LIMIT {cap}))"
    )


class GraphReads:
    """Needs the store's ``_reader()``."""

    def _reader(self) -> sqlite3.Connection:
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
        where = ["e.tenant_id = ? AND e.scope = ? AND e.owner = ?"]
        args: list[object] = [ref.tenant_id, ref.scope.value, ref.owner]
        if types:
            where.append(f"e.type IN ({','.join('?' for _ in types)})")
            args.extend(types)
        if prefix:
            where.append("e.folded >= ? AND e.folded < ?")
            args.extend((prefix, prefix + _TOP))
        if before is not None:
            seen = to_micros(before[0])
            where.append("(e.last_seen < ? OR (e.last_seen = ? AND e.entity_id < ?))")
            args.extend((seen, seen, before[1]))
        cap = max(1, int(count_cap))
        counted = (
            f"{_count('subject_id', '', cap)} + "
            f"{_count('object_id', ' AND f.subject_id <> e.entity_id', cap)}"
        )
        columns = ", ".join(f"e.{c.strip()}" for c in _ENTITY.split(","))
        rows = (
            self._reader()
            .execute(
                # the page first, then the counts of its rows only (not of every entity sorted)
                f"SELECT {columns}, {counted} AS facts FROM (SELECT * FROM graph_entities e"
                f" WHERE {' AND '.join(where)} AND {_NAMED}"
                " ORDER BY e.last_seen DESC, e.entity_id DESC LIMIT ?) e"
                " ORDER BY e.last_seen DESC, e.entity_id DESC",
                (*args, limit),
            )
            .fetchall()
        )
        return decode_rows(lambda r: (_entity(r), int(r["facts"])), rows, lambda r: r[0])

    def graph_memory_rows(
        self, ref: ScopeRef, memory_id: str, limit: int
    ) -> tuple[list[Entity], list[Fact]]:
        reader = self._reader()
        part = (ref.tenant_id, ref.scope.value, ref.owner)
        columns = ", ".join(f"e.{c.strip()}" for c in _ENTITY.split(","))
        named = reader.execute(
            f"SELECT {columns} FROM graph_mentions g JOIN graph_entities e ON"
            " e.tenant_id = g.tenant_id AND e.scope = g.scope AND e.owner = g.owner"
            " AND e.entity_id = g.entity_id WHERE g.tenant_id = ? AND g.memory_id = ?"
            " AND g.scope = ? AND g.owner = ? ORDER BY e.name, e.entity_id LIMIT ?",
            (ref.tenant_id, memory_id, ref.scope.value, ref.owner, limit),
        ).fetchall()
        facts = reader.execute(
            f"SELECT {_FACT} FROM graph_facts WHERE tenant_id = ? AND memory_id = ?"
            " AND scope = ? AND owner = ? ORDER BY recorded_at, fact_id LIMIT ?",
            (part[0], memory_id, part[1], part[2], limit),
        ).fetchall()
        return (
            decode_rows(_entity, named, lambda r: r["entity_id"]),
            decode_rows(_fact, facts, lambda r: r["fact_id"]),
        )

    def graph_open_facts(self, ref: ScopeRef, entity_id: str, limit: int) -> list[Fact]:
        rows = (
            self._reader()
            .execute(
                f"SELECT {_FACT} FROM graph_facts f WHERE f.tenant_id = ? AND f.scope = ?"
                f" AND f.owner = ? AND (f.subject_id = ? OR f.object_id = ?)"
                f" AND f.invalid_at IS NULL AND {_ACTIVE_F}"
                " ORDER BY f.recorded_at DESC, f.fact_id LIMIT ?",
                (ref.tenant_id, ref.scope.value, ref.owner, entity_id, entity_id, limit),
            )
            .fetchall()
        )
        return decode_rows(_fact, rows, lambda r: r["fact_id"])
