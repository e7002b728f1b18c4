"""The entity graph on SQLite (a mixin of :class:`SQLiteStore`; GRAPH-1).

A memory's extraction is written in one ``BEGIN IMMEDIATE`` transaction by
:func:`quipu.storage.graph_rows.write_extraction`, so resolution and the closing of a
contradicted fact see every earlier write of the scope. Reads return only facts whose source
memory is currently active (a forgotten, quarantined or erased memory's facts are not read).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from quipu.core.graph import (
    Entity,
    Extraction,
    Fact,
    GraphDraft,
    Ontology,
    Source,
    folded_name,
    head,
)
from quipu.core.records import MemoryVersion, Scope, ScopeRef
from quipu.storage import graph_merge
from quipu.storage.decode import decode_rows, loads
from quipu.storage.graph_rows import GraphSQL, GraphWrite, Snapshot, mirror, write_extraction
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros

_PART = "tenant_id = ? AND scope = ? AND owner = ?"
_ENTITY = "entity_id, tenant_id, scope, owner, name, type, aliases, first_seen, last_seen"
_FACT = (
    "fact_id, tenant_id, scope, owner, subject_id, predicate, object_id, value, valid_at,"
    " invalid_at, observed_at, recorded_at, expired_at, memory_id, memory_version, extractor,"
    " surface, key_id, invalidated_by, invalidates"
)
#: Sources a fact or mention may be read from: a memory whose family's current version is
#: active, or a chunk (``<document_id>#<seq>``, quipu.graph.documents) of an active document.
_ACTIVE = (
    "(EXISTS (SELECT 1 FROM memory_versions m WHERE m.tenant_id = f.tenant_id"
    " AND m.id = f.memory_id AND m.is_current = 1 AND m.status = 'active')"
    " OR (instr(f.memory_id, '#') > 0 AND EXISTS (SELECT 1 FROM documents d"
    " WHERE d.tenant_id = f.tenant_id AND d.scope = f.scope AND d.owner = f.owner"
    " AND d.document_id = substr(f.memory_id, 1, instr(f.memory_id, '#') - 1)"
    " AND d.status = 'active')))"
)


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" for _ in items) or "NULL"


class _SQL:
    """:class:`quipu.storage.graph_rows.GraphSQL` on one SQLite transaction."""

    def __init__(self, c: sqlite3.Connection) -> None:
        self.c = c

    def candidates(
        self, ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
    ) -> list[Entity]:
        # three index lookups (a plain OR of them scans the whole partition on SQLite)
        rows = self.c.execute(
            f"SELECT {_ENTITY} FROM graph_entities WHERE {_PART} AND entity_id IN ("
            f"SELECT entity_id FROM graph_entities WHERE {_PART} AND folded IN ({_marks(folded)})"
            f" UNION SELECT entity_id FROM graph_entities WHERE {_PART}"
            f" AND head IN ({_marks(heads)}) UNION SELECT entity_id FROM graph_aliases"
            f" WHERE {_PART} AND folded IN ({_marks(folded)})) ORDER BY first_seen, entity_id"
            " LIMIT 500",
            (*_part(ref), *_part(ref), *folded, *_part(ref), *heads, *_part(ref), *folded),
        ).fetchall()
        return decode_rows(_entity, rows, lambda r: r["entity_id"])

    def read(
        self,
        ref: ScopeRef,
        folded: Sequence[str],
        heads: Sequence[str],
        predicates: Sequence[str],
        memory_id: str | None,
    ) -> Snapshot:
        entities = self.candidates(ref, folded, heads)
        ids = [e.entity_id for e in entities]
        declared = self.c.execute(
            "SELECT kind, name FROM graph_ontology WHERE tenant_id = ?", (ref.tenant_id,)
        ).fetchall()
        types = {str(r[1]) for r in declared if r[0] == "type"}
        single = sorted({*predicates, *(str(r[1]) for r in declared if r[0] == "predicate")})
        rows = self.c.execute(
            f"SELECT {_FACT} FROM graph_facts f WHERE {_PART} AND invalid_at IS NULL"
            f" AND subject_id IN ({_marks(ids)}) AND predicate IN ({_marks(single)})",
            (*_part(ref), *ids, *single),
        ).fetchall()
        mirrored = (
            memory_id is not None
            and self.c.execute(
                "SELECT 1 FROM graph_mentions WHERE tenant_id = ? AND memory_id = ? LIMIT 1",
                (ref.tenant_id, memory_id),
            ).fetchone()
        )
        return Snapshot(
            entities,
            decode_rows(_fact, rows, lambda r: r["fact_id"]),
            types=types,
            predicates=set(single) - set(predicates),
            mirrored=bool(mirrored),
        )

    def apply(
        self, ref: ScopeRef, plan: GraphWrite, source: Source, now: datetime, retire: bool
    ) -> None:
        part = _part(ref)
        if retire:
            self.c.execute(
                "UPDATE graph_facts SET invalid_at = ?, expired_at = ? WHERE tenant_id = ?"
                " AND memory_id = ? AND memory_version < ? AND invalid_at IS NULL",
                (
                    to_micros(source.valid_at),
                    to_micros(now),
                    ref.tenant_id,
                    source.memory_id,
                    source.memory_version,
                ),
            )
            self.c.execute(
                "DELETE FROM graph_mentions WHERE tenant_id = ? AND memory_id = ?",
                (ref.tenant_id, source.memory_id),
            )
        self.c.executemany(
            "INSERT INTO graph_entities (tenant_id, scope, owner, entity_id, name, folded, head,"
            " type, aliases, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    *part,
                    e.entity_id,
                    e.name,
                    folded_name(e.name),
                    head(folded_name(e.name)),
                    e.type,
                    json.dumps(list(e.aliases)),
                    to_micros(e.first_seen),
                    to_micros(e.last_seen),
                )
                for e in plan.new_entities
            ],
        )
        self.c.executemany(
            f"UPDATE graph_entities SET last_seen = ?, aliases = ?, type = ? WHERE {_PART}"
            " AND entity_id = ?",
            [
                (to_micros(now), json.dumps(list(e.aliases)), e.type, *part, e.entity_id)
                for e in plan.touched
            ],
        )
        self.c.executemany(
            "INSERT OR IGNORE INTO graph_aliases (tenant_id, scope, owner, folded, entity_id)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (*part, folded_name(a), e.entity_id)
                for e in (*plan.new_entities, *plan.touched)
                for a in e.aliases
            ],
        )
        self.c.executemany(
            "INSERT INTO graph_mentions (tenant_id, scope, owner, entity_id, memory_id,"
            " memory_version) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
            " memory_version = excluded.memory_version",
            [
                (*part, ident, source.memory_id, source.memory_version)
                for ident in dict.fromkeys(plan.entity_ids)
            ],
        )
        self.c.executemany(
            f"INSERT INTO graph_facts ({_FACT}) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_fact_row(f) for f in plan.facts],
        )
        self.c.executemany(
            f"UPDATE graph_facts SET invalid_at = ?, expired_at = ?, invalidated_by = ?"
            f" WHERE {_PART} AND fact_id = ? AND invalid_at IS NULL",
            [
                (to_micros(x.invalid_at), to_micros(now), x.by, *part, x.fact_id)
                for x in plan.closes
            ],
        )


def mirror_in(
    c: sqlite3.Connection,
    ref: ScopeRef,
    memory: MemoryVersion,
    draft: GraphDraft | None,
    now: datetime,
) -> GraphWrite | None:
    """Write ``memory``'s graph mirror in ``c``'s open transaction (the store's ``insert`` and
    ``append`` call it, so the memory and its graph rows commit together)."""
    return mirror(_SQL(c), ref, memory, draft, now)


def graph_sql(c: sqlite3.Connection) -> GraphSQL:
    """The graph's write statements on ``c``'s open transaction (a document's ``doc_add``
    writes its chunks' graph rows through it, DOC-1)."""
    return _SQL(c)


def _fact_row(f: Fact) -> tuple[object, ...]:
    return (
        f.fact_id,
        f.tenant_id,
        f.scope.value,
        f.owner,
        f.subject_id,
        f.predicate,
        f.object_id,
        f.value,
        to_micros(f.valid_at),
        None if f.invalid_at is None else to_micros(f.invalid_at),
        None if f.observed_at is None else to_micros(f.observed_at),
        to_micros(f.recorded_at),
        None if f.expired_at is None else to_micros(f.expired_at),
        f.memory_id,
        f.memory_version,
        f.extractor,
        f.surface,
        f.key_id,
        f.invalidated_by,
        f.invalidates,
    )


class GraphTables:
    """Needs the store's ``_tx()`` and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def graph_write(
        self,
        ref: ScopeRef,
        extraction: Extraction,
        source: Source,
        now: datetime,
        ontology: Ontology | None = None,
        *,
        fill: bool = False,
    ) -> GraphWrite | None:
        with self._tx() as c:
            return write_extraction(
                _SQL(c), ref, extraction, source, now, ontology, mode="fill" if fill else "new"
            )

    def graph_lookup(
        self, ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
    ) -> list[Entity]:
        return _SQL(self._reader()).candidates(ref, folded, heads)

    def graph_entities(self, ref: ScopeRef, entity_ids: Sequence[str]) -> list[Entity]:
        ids = list(entity_ids)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_ENTITY} FROM graph_entities WHERE {_PART}"
                f" AND entity_id IN ({_marks(ids)})",
                (*_part(ref), *ids),
            )
            .fetchall()
        )
        return decode_rows(_entity, rows, lambda r: r["entity_id"])

    def graph_facts(self, ref: ScopeRef, entity_ids: Sequence[str], limit: int) -> list[Fact]:
        ids = list(entity_ids)
        rows = (
            self._reader()
            .execute(
                f"SELECT {_FACT} FROM graph_facts f WHERE {_PART} AND {_ACTIVE} AND"
                f" (subject_id IN ({_marks(ids)}) OR object_id IN ({_marks(ids)}))"
                " ORDER BY recorded_at DESC, fact_id LIMIT ?",
                (*_part(ref), *ids, *ids, limit),
            )
            .fetchall()
        )
        return decode_rows(_fact, rows, lambda r: r["fact_id"])

    def graph_mentions(
        self, ref: ScopeRef, entity_ids: Sequence[str], limit: int
    ) -> list[tuple[str, str]]:
        ids = list(entity_ids)
        rows = (
            self._reader()
            .execute(
                f"SELECT f.entity_id, f.memory_id FROM graph_mentions f WHERE {_PART} AND"
                f" {_ACTIVE} AND f.entity_id IN ({_marks(ids)}) ORDER BY f.memory_id LIMIT ?",
                (*_part(ref), *ids, limit),
            )
            .fetchall()
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def graph_forget(self, tenant_id: str, memory_ids: Sequence[str]) -> int:
        ids = list(memory_ids)
        with self._tx() as c:
            gone = c.execute(
                f"DELETE FROM graph_facts WHERE tenant_id = ? AND memory_id IN ({_marks(ids)})",
                (tenant_id, *ids),
            ).rowcount
            c.execute(
                f"DELETE FROM graph_mentions WHERE tenant_id = ? AND memory_id IN ({_marks(ids)})",
                (tenant_id, *ids),
            )
            # Entities no memory names any more go too (their names came from erased text).
            orphans = (
                "tenant_id = ? AND NOT EXISTS (SELECT 1 FROM graph_mentions m WHERE"
                " m.tenant_id = e.tenant_id AND m.scope = e.scope AND m.owner = e.owner"
                " AND m.entity_id = e.entity_id)"
            )
            c.execute(
                "DELETE FROM graph_aliases WHERE tenant_id = ? AND entity_id IN (SELECT"
                f" entity_id FROM graph_entities e WHERE {orphans})",
                (tenant_id, tenant_id),
            )
            c.execute(f"DELETE FROM graph_entities AS e WHERE {orphans}", (tenant_id,))
            graph_merge.drop_history(c, tenant_id, "?")
            return int(gone)

    def graph_merge(
        self,
        ref: ScopeRef,
        kept_id: str,
        merged_id: str,
        merge_id: str,
        now: datetime,
        by: str | None,
        reason: str | None,
    ) -> tuple[Entity, graph_merge.MergeRecord]:
        with self._tx() as c:
            return graph_merge.merge(
                c, _DIALECT, ref, kept_id, merged_id, merge_id, now, by, reason
            )

    def graph_merge_revert(
        self, ref: ScopeRef, merge_id: str, now: datetime, by: str | None
    ) -> tuple[Entity, Entity]:
        with self._tx() as c:
            return graph_merge.revert(c, _DIALECT, ref, merge_id, now, by)

    def graph_entity_history(self, ref: ScopeRef, entity_id: str) -> list[dict[str, Any]]:
        return graph_merge.history(self._reader(), _DIALECT, ref, entity_id)

    def graph_ontology(self, tenant_id: str) -> tuple[set[str], set[str]]:
        rows = (
            self._reader()
            .execute("SELECT kind, name FROM graph_ontology WHERE tenant_id = ?", (tenant_id,))
            .fetchall()
        )
        return {r[1] for r in rows if r[0] == "type"}, {r[1] for r in rows if r[0] == "predicate"}

    def graph_declare(
        self, tenant_id: str, kind: str, name: str, by: str | None, now: datetime
    ) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO graph_ontology (tenant_id, kind, name, declared_by,"
                " declared_at) VALUES (?, ?, ?, ?, ?)",
                (tenant_id, kind, name, by, to_micros(now)),
            )


_DIALECT = graph_merge.Dialect("?", to_micros, lambda v: from_micros(int(v)))


def _entity(r: sqlite3.Row) -> Entity:
    return Entity(
        entity_id=r["entity_id"],
        tenant_id=r["tenant_id"],
        scope=Scope(r["scope"]),
        owner=r["owner"],
        name=r["name"],
        type=r["type"],
        aliases=tuple(loads(r["aliases"])),
        first_seen=from_micros(int(r["first_seen"])),
        last_seen=from_micros(int(r["last_seen"])),
    )


def _fact(r: sqlite3.Row) -> Fact:
    return Fact(
        fact_id=r["fact_id"],
        tenant_id=r["tenant_id"],
        scope=Scope(r["scope"]),
        owner=r["owner"],
        subject_id=r["subject_id"],
        predicate=r["predicate"],
        object_id=r["object_id"],
        value=r["value"],
        valid_at=from_micros(int(r["valid_at"])),
        invalid_at=from_micros_opt(r["invalid_at"]),
        observed_at=from_micros_opt(r["observed_at"]),
        recorded_at=from_micros(int(r["recorded_at"])),
        expired_at=from_micros_opt(r["expired_at"]),
        memory_id=r["memory_id"],
        memory_version=int(r["memory_version"]),
        extractor=r["extractor"],
        surface=r["surface"],
        key_id=r["key_id"],
        invalidated_by=r["invalidated_by"],
        invalidates=r["invalidates"],
    )
