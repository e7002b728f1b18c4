"""The entity graph's write step, once for both backends (GRAPH-1).

:func:`write_extraction` runs inside a backend's write transaction over a :class:`GraphSQL`
(the few statements it needs, in the backend's dialect): resolve each mention to an entity of the
scope (:func:`quipu.core.graph.resolve`), record the mention, then append each fact, closing the
current fact of a single-valued predicate it contradicts (:func:`quipu.core.graph.close_against`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from quipu.core.graph import (
    Entity,
    Extraction,
    Fact,
    Ontology,
    Source,
    close_against,
    fold_value,
    folded_name,
    head,
    resolve,
)
from quipu.core.records import ScopeRef


class GraphSQL(Protocol):
    """The statements :func:`write_extraction` needs, on one open transaction."""

    def candidates(
        self, ref: ScopeRef, folded: Sequence[str], heads: Sequence[str]
    ) -> list[Entity]: ...

    def insert_entity(self, entity: Entity) -> None: ...

    def touch_entity(self, ref: ScopeRef, entity: Entity, now: datetime) -> None:
        """Set ``last_seen`` and the aliases (and their index rows) to ``entity``'s."""

    def insert_mention(self, ref: ScopeRef, entity_id: str, source: Source) -> None: ...

    def current_facts(self, ref: ScopeRef, subject_id: str, predicate: str) -> list[Fact]: ...

    def insert_fact(self, fact: Fact) -> None: ...

    def close_fact(
        self, ref: ScopeRef, fact_id: str, invalid_at: datetime, now: datetime, by: str
    ) -> None: ...


@dataclass
class GraphWrite:
    """What one memory added to the graph."""

    entity_ids: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)


def write_extraction(
    sql: GraphSQL,
    ref: ScopeRef,
    extraction: Extraction,
    source: Source,
    now: datetime,
    ontology: Ontology,
) -> GraphWrite:
    out = GraphWrite()
    keys = [folded_name(m.name) for m in extraction.mentions]
    pool = sql.candidates(ref, sorted(set(keys)), sorted({head(k) for k in keys if k}))
    for mention, key in zip(extraction.mentions, keys, strict=True):
        kind = mention.type if mention.type in ontology.types else "other"
        found, alias = resolve(mention, pool)
        if found is None:
            entity = Entity(
                entity_id=uuid.uuid4().hex,
                tenant_id=ref.tenant_id,
                scope=ref.scope,
                owner=ref.owner,
                name=mention.name,
                type=kind,
                aliases=(),
                first_seen=now,
                last_seen=now,
            )
            sql.insert_entity(entity)
            pool.append(entity)
            out.created.append(entity.entity_id)
        else:
            aliases = found.aliases
            if alias and key not in {folded_name(a) for a in aliases}:
                aliases = (*aliases, mention.name)
            typed = kind if found.type == "other" and kind != "other" else found.type
            entity = Entity(
                **{**found.__dict__, "aliases": aliases, "last_seen": now, "type": typed}
            )
            sql.touch_entity(ref, entity, now)
            pool[pool.index(found)] = entity
        out.entity_ids.append(entity.entity_id)
        sql.insert_mention(ref, entity.entity_id, source)
    for draft in extraction.facts:
        fact = Fact(
            fact_id=uuid.uuid4().hex,
            tenant_id=ref.tenant_id,
            scope=ref.scope,
            owner=ref.owner,
            subject_id=out.entity_ids[draft.subject],
            predicate=draft.predicate,
            object_id=None if draft.object is None else out.entity_ids[draft.object],
            value=draft.value,
            valid_at=source.valid_at,
            invalid_at=None,
            observed_at=source.observed_at,
            recorded_at=now,
            expired_at=None,
            memory_id=source.memory_id,
            memory_version=source.memory_version,
            extractor=extraction.extractor,
            surface=source.surface,
            key_id=source.key_id,
        )
        if fact.object_id == fact.subject_id:
            continue
        if fact.predicate in ontology.single_valued:
            fact = _contradict(sql, ref, fact, now, out)
        sql.insert_fact(fact)
        out.facts.append(fact)
    return out


def _contradict(sql: GraphSQL, ref: ScopeRef, fact: Fact, now: datetime, out: GraphWrite) -> Fact:
    """Close whichever of ``fact`` and each open contradicting fact began first."""
    for current in sql.current_facts(ref, fact.subject_id, fact.predicate):
        same = current.object_id == fact.object_id and fold_value(current.value) == fold_value(
            fact.value
        )
        if same or current.invalid_at is not None:
            continue
        which, at = close_against(fact, current)
        if which == "old":
            sql.close_fact(ref, current.fact_id, at, now, fact.fact_id)
            out.closed.append(current.fact_id)
            if fact.invalidates is None:
                fact = Fact(**{**fact.__dict__, "invalidates": current.fact_id})
        elif fact.invalid_at is None:
            fact = Fact(
                **{
                    **fact.__dict__,
                    "invalid_at": at,
                    "expired_at": now,
                    "invalidated_by": current.fact_id,
                }
            )
    return fact
