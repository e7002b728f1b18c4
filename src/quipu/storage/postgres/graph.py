"""The entity graph on PostgreSQL (a mixin of :class:`PostgresStore`; GRAPH-1).

A memory's extraction is written in one transaction by
:func:`quipu.storage.graph_rows.write_extraction`; writers of one scope partition take turns on
a transaction-scoped advisory lock, so resolution and the closing of a contradicted fact see
every earlier write of the scope. Reads return only facts whose source memory is currently
active. Every statement names ``tenant_id``, so under Citus each runs on the tenant's shard.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import psycopg

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

_PART = "tenant_id = %s AND scope = %s AND owner = %s"
_ENTITY = "entity_id, tenant_id, scope, owner, name, type, aliases, first_seen, last_seen"
_FACT = (
    "fact_id, tenant_id, scope, owner, subject_id, predicate, object_id, value, valid_at,"
    " invalid_at, observed_at, recorded_at, expired_at, memory_id, memory_version, extractor,"
    " surface, key_id, invalidated_by, invalidates"
)
_ACTIVE = (
    "(EXISTS (SELECT 1 FROM memory_versions m WHERE m.tenant_id = f.tenant_id"
    " AND m.id = f.memory_id AND m.is_current AND m.status = 'active')"
    " OR (strpos(f.memory_id, '#') > 0 AND EXISTS (SELECT 1 FROM documents d"
    " WHERE d.tenant_id = f.tenant_id AND d.scope = f.scope AND d.owner = f.owner"
    " AND d.document_id = split_part(f.memory_id, '#', 1) AND d.status = 'active')))"
)


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _lock_key(ref: ScopeRef) -> int:
    raw = "\x1f".join(("graph", *_part(ref))).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def _match(
    ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
) -> tuple[str, tuple[Any, ...]]:
    """The resolution candidates' condition: folded name, head or alias."""
    where = (
        f"{_PART} AND (folded = ANY(%s) OR head = ANY(%s) OR entity_id IN (SELECT entity_id"
        f" FROM graph_aliases WHERE {_PART} AND folded = ANY(%s)))"
    )
    return where, (*_part(ref), list(folded), list(heads), *_part(ref), list(folded))


def _candidates(
    conn: psycopg.Connection[Any], ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
) -> list[Entity]:
    where, args = _match(ref, folded, heads)
    rows = conn.execute(
        f"SELECT {_ENTITY} FROM graph_entities WHERE {where} ORDER BY first_seen, entity_id"
        " LIMIT 500",
        args,
    ).fetchall()
    return decode_rows(_entity, rows, lambda r: r[0])


class _SQL:
    """:class:`quipu.storage.graph_rows.GraphSQL` on one PostgreSQL transaction; ``lock`` is
    the partition's writer lock, taken with the first read."""

    def __init__(
        self, conn: psycopg.Connection[Any], lock: int, pipe: psycopg.Pipeline | None
    ) -> None:
        self.conn = conn
        self.lock = lock
        self.pipe = pipe

    @contextmanager
    def _pipeline(self) -> Iterator[psycopg.Pipeline]:
        """The caller's pipeline (never a nested one: entering and leaving a nested block
        each cost psycopg a sync, a round trip), or a new one on a connection not in one."""
        if self.pipe is not None:
            yield self.pipe
            return
        with self.conn.pipeline() as pipe:
            yield pipe

    def read(
        self,
        ref: ScopeRef,
        folded: Sequence[str],
        heads: Sequence[str],
        predicates: Sequence[str],
        memory_id: str | None,
    ) -> Snapshot:
        """The lock, the candidates, their open facts, the tenant's ontology and whether the
        memory is mirrored, in one pipeline (one round trip, with whatever the transaction
        queued before)."""
        where, args = _match(ref, folded, heads)
        c = [self.conn.cursor() for _ in range(5)]
        try:
            with self._pipeline() as pipe:
                c[0].execute("SELECT pg_advisory_xact_lock(%s)", (self.lock,))
                c[1].execute(
                    f"SELECT {_ENTITY} FROM graph_entities WHERE {where}"
                    " ORDER BY first_seen, entity_id LIMIT 500",
                    args,
                )
                c[2].execute(
                    f"SELECT {_FACT} FROM graph_facts f WHERE {_PART} AND invalid_at IS NULL"
                    " AND (predicate = ANY(%s) OR predicate IN (SELECT name FROM graph_ontology"
                    " WHERE tenant_id = %s AND kind = 'predicate')) AND subject_id IN"
                    f" (SELECT entity_id FROM graph_entities WHERE {where})",
                    (*_part(ref), list(predicates), ref.tenant_id, *args),
                )
                c[3].execute(
                    "SELECT kind, name FROM graph_ontology WHERE tenant_id = %s", (ref.tenant_id,)
                )
                if memory_id is not None:
                    c[4].execute(
                        "SELECT EXISTS (SELECT 1 FROM graph_mentions WHERE tenant_id = %s"
                        " AND memory_id = %s)",
                        (ref.tenant_id, memory_id),
                    )
                pipe.sync()
            entities = decode_rows(_entity, c[1].fetchall(), lambda r: r[0])
            facts = decode_rows(_fact, c[2].fetchall(), lambda r: r[0])
            declared = c[3].fetchall()
            mirrored = None if memory_id is None else c[4].fetchone()
        finally:
            for cur in c:
                cur.close()
        return Snapshot(
            entities,
            facts,
            types={str(r[1]) for r in declared if r[0] == "type"},
            predicates={str(r[1]) for r in declared if r[0] == "predicate"},
            mirrored=bool(mirrored and mirrored[0]),
        )

    def apply(
        self, ref: ScopeRef, plan: GraphWrite, source: Source, now: datetime, retire: bool
    ) -> None:
        """Every write of the plan queued in the pipeline: sent with the COMMIT."""
        part = _part(ref)
        with self._pipeline(), self.conn.cursor() as cur:
            if retire:
                cur.execute(
                    "UPDATE graph_facts SET invalid_at = %s, expired_at = %s WHERE tenant_id = %s"
                    " AND memory_id = %s AND memory_version < %s AND invalid_at IS NULL",
                    (source.valid_at, now, ref.tenant_id, source.memory_id, source.memory_version),
                )
                cur.execute(
                    "DELETE FROM graph_mentions WHERE tenant_id = %s AND memory_id = %s",
                    (ref.tenant_id, source.memory_id),
                )
            cur.executemany(
                "INSERT INTO graph_entities (tenant_id, scope, owner, entity_id, name, folded,"
                " head, type, aliases, first_seen, last_seen)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        *part,
                        e.entity_id,
                        e.name,
                        folded_name(e.name),
                        head(folded_name(e.name)),
                        e.type,
                        json.dumps(list(e.aliases)),
                        e.first_seen,
                        e.last_seen,
                    )
                    for e in plan.new_entities
                ],
            )
            cur.executemany(
                f"UPDATE graph_entities SET last_seen = %s, aliases = %s, type = %s"
                f" WHERE {_PART} AND entity_id = %s",
                [
                    (now, json.dumps(list(e.aliases)), e.type, *part, e.entity_id)
                    for e in plan.touched
                ],
            )
            cur.executemany(
                "INSERT INTO graph_aliases (tenant_id, scope, owner, folded, entity_id)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [
                    (*part, folded_name(a), e.entity_id)
                    for e in (*plan.new_entities, *plan.touched)
                    for a in e.aliases
                ],
            )
            cur.executemany(
                "INSERT INTO graph_mentions (tenant_id, scope, owner, entity_id, memory_id,"
                " memory_version) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (tenant_id, scope, owner, entity_id, memory_id) DO UPDATE SET"
                " memory_version = excluded.memory_version",
                [
                    (*part, ident, source.memory_id, source.memory_version)
                    for ident in dict.fromkeys(plan.entity_ids)
                ],
            )
            cur.executemany(
                f"INSERT INTO graph_facts ({_FACT}) VALUES (" + ", ".join(["%s"] * 20) + ")",
                [_fact_row(f) for f in plan.facts],
            )
            cur.executemany(
                "UPDATE graph_facts SET invalid_at = %s, expired_at = %s, invalidated_by = %s"
                f" WHERE {_PART} AND fact_id = %s AND invalid_at IS NULL",
                [(x.invalid_at, now, x.by, *part, x.fact_id) for x in plan.closes],
            )


def mirror_in(
    conn: psycopg.Connection[Any],
    ref: ScopeRef,
    memory: MemoryVersion,
    draft: GraphDraft | None,
    now: datetime,
    gate: Callable[[], bool] | None = None,
    pipe: psycopg.Pipeline | None = None,
) -> GraphWrite | None:
    """Write ``memory``'s graph mirror in ``conn``'s open transaction (the store's ``insert``
    and ``append`` call it, so the memory and its graph rows commit together); ``gate`` is
    asked after the batched read (with the memory's own write in the same round trip) whether
    the version was written at all. ``pipe``: the pipeline ``conn`` is in, if it is in one."""
    return mirror(_SQL(conn, _lock_key(ref), pipe), ref, memory, draft, now, gate)


def graph_sql(conn: psycopg.Connection[Any], ref: ScopeRef) -> GraphSQL:
    """The graph's write statements on ``conn``'s open transaction, taking ``ref``'s writer
    lock with the first read (a document's ``doc_add`` writes its chunks' graph rows through
    it, DOC-1)."""
    return _SQL(conn, _lock_key(ref), None)


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
        f.valid_at,
        f.invalid_at,
        f.observed_at,
        f.recorded_at,
        f.expired_at,
        f.memory_id,
        f.memory_version,
        f.extractor,
        f.surface,
        f.key_id,
        f.invalidated_by,
        f.invalidates,
    )


class GraphTables:
    """Needs the store's ``_conn()`` and ``_tx()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
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
        # One pipeline around the transaction: BEGIN, the lock and the reads go in one round
        # trip, the writes and COMMIT in a second.
        with self._conn() as conn, conn.pipeline() as pipe, conn.transaction():
            return write_extraction(
                _SQL(conn, _lock_key(ref), pipe),
                ref,
                extraction,
                source,
                now,
                ontology,
                mode="fill" if fill else "new",
            )

    def graph_lookup(
        self, ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
    ) -> list[Entity]:
        with self._conn() as conn:
            return _candidates(conn, ref, folded, heads)

    def graph_entities(self, ref: ScopeRef, entity_ids: Sequence[str]) -> list[Entity]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_ENTITY} FROM graph_entities WHERE {_PART} AND entity_id = ANY(%s)",
                (*_part(ref), list(entity_ids)),
            ).fetchall()
        return decode_rows(_entity, rows, lambda r: r[0])

    def graph_facts(self, ref: ScopeRef, entity_ids: Sequence[str], limit: int) -> list[Fact]:
        ids = list(entity_ids)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_FACT} FROM graph_facts f WHERE {_PART} AND {_ACTIVE} AND"
                " (subject_id = ANY(%s) OR object_id = ANY(%s))"
                " ORDER BY recorded_at DESC, fact_id LIMIT %s",
                (*_part(ref), ids, ids, limit),
            ).fetchall()
        return decode_rows(_fact, rows, lambda r: r[0])

    def graph_mentions(
        self, ref: ScopeRef, entity_ids: Sequence[str], limit: int
    ) -> list[tuple[str, str]]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT f.entity_id, f.memory_id FROM graph_mentions f WHERE {_PART} AND"
                f" {_ACTIVE} AND f.entity_id = ANY(%s) ORDER BY f.memory_id LIMIT %s",
                (*_part(ref), list(entity_ids), limit),
            ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def graph_forget(self, tenant_id: str, memory_ids: Sequence[str]) -> int:
        ids = list(memory_ids)
        with self._tx() as conn:
            gone = conn.execute(
                "DELETE FROM graph_facts WHERE tenant_id = %s AND memory_id = ANY(%s)",
                (tenant_id, ids),
            ).rowcount
            conn.execute(
                "DELETE FROM graph_mentions WHERE tenant_id = %s AND memory_id = ANY(%s)",
                (tenant_id, ids),
            )
            orphans = (
                "e.tenant_id = %s AND NOT EXISTS (SELECT 1 FROM graph_mentions m WHERE"
                " m.tenant_id = e.tenant_id AND m.scope = e.scope AND m.owner = e.owner"
                " AND m.entity_id = e.entity_id)"
            )
            conn.execute(
                "DELETE FROM graph_aliases a WHERE a.tenant_id = %s AND EXISTS (SELECT 1 FROM"
                f" graph_entities e WHERE e.entity_id = a.entity_id AND {orphans})",
                (tenant_id, tenant_id),
            )
            conn.execute(f"DELETE FROM graph_entities e WHERE {orphans}", (tenant_id,))
            graph_merge.drop_history(conn, tenant_id, "%s")
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
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ref),))
            return graph_merge.merge(
                conn, _DIALECT, ref, kept_id, merged_id, merge_id, now, by, reason
            )

    def graph_merge_revert(
        self, ref: ScopeRef, merge_id: str, now: datetime, by: str | None
    ) -> tuple[Entity, Entity]:
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(ref),))
            return graph_merge.revert(conn, _DIALECT, ref, merge_id, now, by)

    def graph_entity_history(self, ref: ScopeRef, entity_id: str) -> list[dict[str, Any]]:
        with self._conn() as conn:
            return graph_merge.history(conn, _DIALECT, ref, entity_id)

    def graph_ontology(self, tenant_id: str) -> tuple[set[str], set[str]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT kind, name FROM graph_ontology WHERE tenant_id = %s", (tenant_id,)
            ).fetchall()
        return {r[1] for r in rows if r[0] == "type"}, {r[1] for r in rows if r[0] == "predicate"}

    def graph_declare(
        self, tenant_id: str, kind: str, name: str, by: str | None, now: datetime
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO graph_ontology (tenant_id, kind, name, declared_by, declared_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant_id, kind, name, by, now),
            )


_DIALECT = graph_merge.Dialect("%s", lambda v: v, lambda v: v)


def _entity(r: Sequence[Any]) -> Entity:
    return Entity(
        entity_id=r[0],
        tenant_id=r[1],
        scope=Scope(r[2]),
        owner=r[3],
        name=r[4],
        type=r[5],
        aliases=tuple(loads(r[6])),
        first_seen=r[7],
        last_seen=r[8],
    )


def _fact(r: Sequence[Any]) -> Fact:
    return Fact(
        fact_id=r[0],
        tenant_id=r[1],
        scope=Scope(r[2]),
        owner=r[3],
        subject_id=r[4],
        predicate=r[5],
        object_id=r[6],
        value=r[7],
        valid_at=r[8],
        invalid_at=r[9],
        observed_at=r[10],
        recorded_at=r[11],
        expired_at=r[12],
        memory_id=r[13],
        memory_version=int(r[14]),
        extractor=r[15],
        surface=r[16],
        key_id=r[17],
        invalidated_by=r[18],
        invalidates=r[19],
    )
