"""Versioned, reversible entity merges, once for both backends (GRAPH-1).

:func:`merge` runs in a backend's write transaction (the partition's writers take turns): the
kept entity's state before the merge becomes an old version (``graph_entity_versions``), it
gains the merged entity's name and aliases as aliases, the merged entity's facts (as subject or
object) and mentions are re-pointed to it, and the merged entity's row goes; ``graph_merges``
records the merged entity as it was and exactly what moved. :func:`revert` puts it back: the
merged entity returns with its facts and mentions, the kept entity loses the aliases the merge
gave it, and that is a new version of the kept entity too. Nothing is ever rewound: history
keeps every version.

The statements are written once with ``?`` marks; a backend's :class:`Dialect` gives its mark,
how it stores a time and how it reads an entity row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from quipu.core.graph import Entity, folded_name, head
from quipu.core.records import Scope, ScopeRef
from quipu.errors import Conflict, InvalidInput, NotFound

_PART = "tenant_id = ? AND scope = ? AND owner = ?"
_ENTITY = "entity_id, tenant_id, scope, owner, name, type, aliases, first_seen, last_seen"


class Conn(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    mark: str
    time: Callable[[datetime], object]
    read_time: Callable[[Any], datetime]

    def sql(self, text: str) -> str:
        return text if self.mark == "?" else text.replace("?", self.mark)


@dataclass(frozen=True)
class MergeRecord:
    """One merge as recorded: which entity was kept, which merged, when, by whom, reverted."""

    merge_id: str
    kept_id: str
    merged_id: str
    merged_name: str
    merged_at: datetime
    merged_by: str | None
    reason: str | None
    reverted_at: datetime | None
    kept_version: int
    """The kept entity's version the merge made."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "merge_id": self.merge_id,
            "kept_id": self.kept_id,
            "merged_id": self.merged_id,
            "merged_name": self.merged_name,
            "merged_at": self.merged_at.isoformat(),
            "merged_by": self.merged_by,
            "reason": self.reason,
            "reverted_at": None if self.reverted_at is None else self.reverted_at.isoformat(),
            "kept_version": self.kept_version,
        }


def _part(ref: ScopeRef) -> tuple[str, str, str]:
    return ref.tenant_id, ref.scope.value, ref.owner


def _entity(d: Dialect, r: Sequence[Any]) -> Entity:
    return Entity(
        entity_id=str(r[0]),
        tenant_id=str(r[1]),
        scope=Scope(r[2]),
        owner=str(r[3]),
        name=str(r[4]),
        type=str(r[5]),
        aliases=tuple(json.loads(r[6])),
        first_seen=d.read_time(r[7]),
        last_seen=d.read_time(r[8]),
    )


def _snapshot(e: Entity) -> dict[str, Any]:
    return {
        "entity_id": e.entity_id,
        "name": e.name,
        "type": e.type,
        "aliases": list(e.aliases),
        "first_seen": e.first_seen.isoformat(),
        "last_seen": e.last_seen.isoformat(),
    }


def _from_snapshot(ref: ScopeRef, s: dict[str, Any]) -> Entity:
    return Entity(
        entity_id=s["entity_id"],
        tenant_id=ref.tenant_id,
        scope=ref.scope,
        owner=ref.owner,
        name=s["name"],
        type=s["type"],
        aliases=tuple(s["aliases"]),
        first_seen=datetime.fromisoformat(s["first_seen"]),
        last_seen=datetime.fromisoformat(s["last_seen"]),
    )


def load_entity(c: Conn, d: Dialect, ref: ScopeRef, entity_id: str) -> Entity | None:
    row = c.execute(
        d.sql(f"SELECT {_ENTITY} FROM graph_entities WHERE {_PART} AND entity_id = ?"),
        (*_part(ref), entity_id),
    ).fetchone()
    return None if row is None else _entity(d, row)


def version_of(c: Conn, d: Dialect, ref: ScopeRef, entity_id: str) -> int:
    """The entity's current version: one more than its newest kept old version."""
    row = c.execute(
        d.sql(f"SELECT max(version) FROM graph_entity_versions WHERE {_PART} AND entity_id = ?"),
        (*_part(ref), entity_id),
    ).fetchone()
    return 1 + int(row[0] or 0) if row is not None else 1


def _keep_version(
    c: Conn, d: Dialect, ref: ScopeRef, e: Entity, change: str, merge_id: str, now: datetime
) -> int:
    version = version_of(c, d, ref, e.entity_id)
    c.execute(
        d.sql(
            "INSERT INTO graph_entity_versions (tenant_id, scope, owner, entity_id, version,"
            " name, type, aliases, first_seen, last_seen, change, merge_id, recorded_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ),
        (
            *_part(ref),
            e.entity_id,
            version,
            e.name,
            e.type,
            json.dumps(list(e.aliases)),
            d.time(e.first_seen),
            d.time(e.last_seen),
            change,
            merge_id,
            d.time(now),
        ),
    )
    return version + 1


def _write_entity(c: Conn, d: Dialect, ref: ScopeRef, e: Entity, *, insert: bool) -> None:
    if insert:
        c.execute(
            d.sql(
                "INSERT INTO graph_entities (tenant_id, scope, owner, entity_id, name, folded,"
                " head, type, aliases, first_seen, last_seen)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                *_part(ref),
                e.entity_id,
                e.name,
                folded_name(e.name),
                head(folded_name(e.name)),
                e.type,
                json.dumps(list(e.aliases)),
                d.time(e.first_seen),
                d.time(e.last_seen),
            ),
        )
    else:
        c.execute(
            d.sql(
                "UPDATE graph_entities SET aliases = ?, type = ?, first_seen = ?, last_seen = ?"
                f" WHERE {_PART} AND entity_id = ?"
            ),
            (
                json.dumps(list(e.aliases)),
                e.type,
                d.time(e.first_seen),
                d.time(e.last_seen),
                *_part(ref),
                e.entity_id,
            ),
        )
    for alias in e.aliases:
        c.execute(
            d.sql(
                "INSERT INTO graph_aliases (tenant_id, scope, owner, folded, entity_id)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ),
            (*_part(ref), folded_name(alias), e.entity_id),
        )


def _ids(c: Conn, d: Dialect, sql: str, params: Sequence[Any]) -> list[Any]:
    return [r[0] if len(r) == 1 else tuple(r) for r in c.execute(d.sql(sql), params).fetchall()]


def merge(
    c: Conn,
    d: Dialect,
    ref: ScopeRef,
    kept_id: str,
    merged_id: str,
    merge_id: str,
    now: datetime,
    by: str | None,
    reason: str | None,
) -> tuple[Entity, MergeRecord]:
    """Merge ``merged_id`` into ``kept_id`` (both of the scope partition ``ref``)."""
    if kept_id == merged_id:
        raise InvalidInput("an entity cannot be merged into itself", code="invalid_merge")
    kept = load_entity(c, d, ref, kept_id)
    gone = load_entity(c, d, ref, merged_id)
    for ident, found in ((kept_id, kept), (merged_id, gone)):
        if found is None:
            raise NotFound(f"no entity {ident!r} in this scope", details={"entity": ident})
    assert kept is not None and gone is not None
    version = _keep_version(c, d, ref, kept, "merge", merge_id, now)
    names = {kept.folded}
    aliases: list[str] = []
    for name in (*kept.aliases, gone.name, *gone.aliases):
        if folded_name(name) not in names:
            names.add(folded_name(name))
            aliases.append(name)
    after = replace(
        kept,
        aliases=tuple(aliases),
        type=gone.type if kept.type == "other" else kept.type,
        first_seen=min(kept.first_seen, gone.first_seen),
        last_seen=max(kept.last_seen, gone.last_seen),
    )
    part = _part(ref)
    subjects = _ids(
        c,
        d,
        f"SELECT fact_id FROM graph_facts WHERE {_PART} AND subject_id = ?",
        (*part, merged_id),
    )
    objects = _ids(
        c, d, f"SELECT fact_id FROM graph_facts WHERE {_PART} AND object_id = ?", (*part, merged_id)
    )
    mentions = _ids(
        c,
        d,
        f"SELECT memory_id, memory_version FROM graph_mentions WHERE {_PART} AND entity_id = ?",
        (*part, merged_id),
    )
    known = set(
        _ids(
            c, d, f"SELECT memory_id FROM graph_mentions WHERE {_PART} AND entity_id = ?",
            (*part, kept_id),
        )
    )  # fmt: skip
    moved = [m for m, _ in mentions if m not in known]
    dropped = [[m, int(v)] for m, v in mentions if m in known]
    c.execute(
        d.sql(f"UPDATE graph_facts SET subject_id = ? WHERE {_PART} AND subject_id = ?"),
        (kept_id, *part, merged_id),
    )
    c.execute(
        d.sql(f"UPDATE graph_facts SET object_id = ? WHERE {_PART} AND object_id = ?"),
        (kept_id, *part, merged_id),
    )
    for m, _ in dropped:  # the kept entity already names that memory
        c.execute(
            d.sql(f"DELETE FROM graph_mentions WHERE {_PART} AND entity_id = ? AND memory_id = ?"),
            (*part, merged_id, m),
        )
    c.execute(
        d.sql(f"UPDATE graph_mentions SET entity_id = ? WHERE {_PART} AND entity_id = ?"),
        (kept_id, *part, merged_id),
    )
    c.execute(
        d.sql(f"DELETE FROM graph_aliases WHERE {_PART} AND entity_id = ?"), (*part, merged_id)
    )
    c.execute(
        d.sql(f"DELETE FROM graph_entities WHERE {_PART} AND entity_id = ?"), (*part, merged_id)
    )
    _write_entity(c, d, ref, after, insert=False)
    record = {"subjects": subjects, "objects": objects, "mentions": moved, "dropped": dropped}
    c.execute(
        d.sql(
            "INSERT INTO graph_merges (tenant_id, scope, owner, merge_id, kept_id, merged_id,"
            " kept_before, merged, moved, merged_at, merged_by, reason)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ),
        (
            *part,
            merge_id,
            kept_id,
            merged_id,
            json.dumps(_snapshot(kept)),
            json.dumps(_snapshot(gone)),
            json.dumps(record),
            d.time(now),
            by,
            reason,
        ),
    )
    return after, MergeRecord(
        merge_id, kept_id, merged_id, gone.name, now, by, reason, None, version
    )


def revert(
    c: Conn, d: Dialect, ref: ScopeRef, merge_id: str, now: datetime, by: str | None
) -> tuple[Entity, Entity]:
    """Undo merge ``merge_id``: (the kept entity as it is now, the merged entity back)."""
    part = _part(ref)
    row = c.execute(
        d.sql(
            "SELECT kept_id, merged_id, kept_before, merged, moved, reverted_at, merged_at"
            f" FROM graph_merges WHERE {_PART} AND merge_id = ?"
        ),
        (*part, merge_id),
    ).fetchone()
    if row is None:
        raise NotFound(f"no merge {merge_id!r} in this scope", details={"merge_id": merge_id})
    kept_id, merged_id = str(row[0]), str(row[1])
    if row[5] is not None:
        raise Conflict(f"merge {merge_id} is already reverted", code="merge_reverted")
    later = c.execute(
        d.sql(
            f"SELECT merge_id FROM graph_merges WHERE {_PART} AND kept_id = ?"
            " AND merged_at > ? AND reverted_at IS NULL"
        ),
        (*part, kept_id, row[6]),
    ).fetchone()
    kept = load_entity(c, d, ref, kept_id)
    if later is not None or kept is None or load_entity(c, d, ref, merged_id) is not None:
        raise Conflict(
            f"merge {merge_id} cannot be reverted: the entities changed since"
            " (revert later merges first)",
            code="merge_conflict",
            details={"merge_id": merge_id, "later": None if later is None else str(later[0])},
        )
    before = _from_snapshot(ref, json.loads(row[2]))
    gone = _from_snapshot(ref, json.loads(row[3]))
    moved = json.loads(row[4])
    _keep_version(c, d, ref, kept, "revert", merge_id, now)
    given = {folded_name(n) for n in (gone.name, *gone.aliases)} - {
        folded_name(a) for a in before.aliases
    }
    restored = replace(
        kept,
        aliases=tuple(a for a in kept.aliases if folded_name(a) not in given),
        type=before.type,
        first_seen=before.first_seen,
    )
    for alias in given:
        c.execute(
            d.sql(f"DELETE FROM graph_aliases WHERE {_PART} AND folded = ? AND entity_id = ?"),
            (*part, alias, kept_id),
        )
    _write_entity(c, d, ref, restored, insert=False)
    _write_entity(c, d, ref, gone, insert=True)
    for fact_id in moved["subjects"]:
        c.execute(
            d.sql(f"UPDATE graph_facts SET subject_id = ? WHERE {_PART} AND fact_id = ?"),
            (merged_id, *part, fact_id),
        )
    for fact_id in moved["objects"]:
        c.execute(
            d.sql(f"UPDATE graph_facts SET object_id = ? WHERE {_PART} AND fact_id = ?"),
            (merged_id, *part, fact_id),
        )
    for memory_id in moved["mentions"]:
        c.execute(
            d.sql(
                f"UPDATE graph_mentions SET entity_id = ? WHERE {_PART} AND entity_id = ?"
                " AND memory_id = ?"
            ),
            (merged_id, *part, kept_id, memory_id),
        )
    for memory_id, version in moved["dropped"]:
        c.execute(
            d.sql(
                "INSERT INTO graph_mentions (tenant_id, scope, owner, entity_id, memory_id,"
                " memory_version) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ),
            (*part, merged_id, memory_id, version),
        )
    c.execute(
        d.sql(
            "UPDATE graph_merges SET reverted_at = ?, reverted_by = ?"
            f" WHERE {_PART} AND merge_id = ?"
        ),
        (d.time(now), by, *part, merge_id),
    )
    return restored, gone


def history(c: Conn, d: Dialect, ref: ScopeRef, entity_id: str) -> list[dict[str, Any]]:
    """The entity's old versions, oldest first, each with what ended it."""
    rows = c.execute(
        d.sql(
            "SELECT version, name, type, aliases, first_seen, last_seen, change, merge_id,"
            f" recorded_at FROM graph_entity_versions WHERE {_PART} AND entity_id = ?"
            " ORDER BY version"
        ),
        (*_part(ref), entity_id),
    ).fetchall()
    return [
        {
            "version": int(r[0]),
            "name": r[1],
            "type": r[2],
            "aliases": json.loads(r[3]),
            "first_seen": d.read_time(r[4]).isoformat(),
            "last_seen": d.read_time(r[5]).isoformat(),
            "ended_by": r[6],
            "merge_id": r[7],
            "ended_at": d.read_time(r[8]).isoformat(),
        }
        for r in rows
    ]


def drop_history(c: Conn, tenant_id: str, mark: str) -> None:
    """After an erase removed entities: their old versions and the merges naming them go too
    (they hold names read from the erased text)."""
    gone = (
        "NOT EXISTS (SELECT 1 FROM graph_entities e WHERE e.tenant_id = x.tenant_id"
        " AND e.scope = x.scope AND e.owner = x.owner AND e.entity_id = x.{col})"
    )
    c.execute(
        f"DELETE FROM graph_entity_versions AS x WHERE tenant_id = {mark} AND "
        + gone.format(col="entity_id"),
        (tenant_id,),
    )
    c.execute(
        f"DELETE FROM graph_merges AS x WHERE tenant_id = {mark} AND " + gone.format(col="kept_id"),
        (tenant_id,),
    )
