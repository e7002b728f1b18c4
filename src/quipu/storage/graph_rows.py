"""The entity graph's write step, once for both backends (GRAPH-1).

:func:`write_extraction` runs inside a backend's write transaction over a :class:`GraphSQL`
(two reads and one batched write, in the backend's dialect): resolve each mention to an entity
of the scope (:func:`quipu.core.graph.resolve`), record the mention, then append each fact,
closing the open fact of a single-valued predicate it contradicts
(:func:`quipu.core.graph.close_against`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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
    """The statements :func:`write_extraction` needs, on one open transaction: two reads,
    then one batched write (a backend sends it in as few round trips as it can)."""

    def read(
        self, ref: ScopeRef, folded: Sequence[str], heads: Sequence[str], predicates: Sequence[str]
    ) -> tuple[list[Entity], list[Fact]]:
        """The resolution candidates (entities whose folded name or alias is in ``folded`` or
        whose head is in ``heads``; at most 500) and their open facts (no ``invalid_at``) with
        a predicate in ``predicates``; a backend may send both reads at once."""

    def apply(self, ref: ScopeRef, plan: GraphWrite, source: Source, now: datetime) -> None:
        """Insert ``plan.new_entities``, set ``last_seen``, type and aliases (and their index
        rows) of ``plan.touched``, record a mention of ``source`` for each of
        ``plan.entity_ids``, insert ``plan.facts`` and close ``plan.closes``."""


@dataclass
class Close:
    """An open fact to close: its id, its ``invalid_at`` and the fact that closes it."""

    fact_id: str
    invalid_at: datetime
    by: str


@dataclass
class GraphWrite:
    """What one memory added to the graph (the plan :meth:`GraphSQL.apply` writes)."""

    entity_ids: list[str] = field(default_factory=list)
    new_entities: list[Entity] = field(default_factory=list)
    touched: list[Entity] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    closes: list[Close] = field(default_factory=list)

    @property
    def created(self) -> list[str]:
        return [e.entity_id for e in self.new_entities]

    @property
    def closed(self) -> list[str]:
        return [c.fact_id for c in self.closes]


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
    folded, heads = sorted(set(keys)), sorted({head(k) for k in keys if k})
    pool, open_all = sql.read(ref, folded, heads, sorted(ontology.single_valued))
    touched: dict[str, Entity] = {}
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
            out.new_entities.append(entity)
            pool.append(entity)
        else:
            aliases = found.aliases
            if alias and key not in {folded_name(a) for a in aliases}:
                aliases = (*aliases, mention.name)
            typed = kind if found.type == "other" and kind != "other" else found.type
            entity = replace(found, aliases=aliases, last_seen=now, type=typed)
            pool[pool.index(found)] = entity
            fresh = any(e.entity_id == entity.entity_id for e in out.new_entities)
            if fresh:
                out.new_entities = [
                    entity if e.entity_id == entity.entity_id else e for e in out.new_entities
                ]
            else:
                touched[entity.entity_id] = entity
        out.entity_ids.append(entity.entity_id)
    out.touched = list(touched.values())
    drafts = [
        Fact(
            fact_id=uuid.uuid4().hex,
            tenant_id=ref.tenant_id,
            scope=ref.scope,
            owner=ref.owner,
            subject_id=out.entity_ids[d.subject],
            predicate=d.predicate,
            object_id=None if d.object is None else out.entity_ids[d.object],
            value=d.value,
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
        for d in extraction.facts
    ]
    drafts = [f for f in drafts if f.object_id != f.subject_id]
    single = sorted(
        {(f.subject_id, f.predicate) for f in drafts if f.predicate in ontology.single_valued}
    )
    wanted = set(single)
    open_now = [f for f in open_all if (f.subject_id, f.predicate) in wanted]
    for draft in drafts:
        fact = draft
        if fact.predicate in ontology.single_valued:
            rivals = [
                f
                for f in (*open_now, *out.facts)
                if (f.subject_id, f.predicate) == (fact.subject_id, fact.predicate)
                and f.invalid_at is None
                and f.fact_id not in out.closed
            ]
            fact = _contradict(fact, rivals, now, out)
        out.facts.append(fact)
    sql.apply(ref, out, source, now)
    return out


def _contradict(fact: Fact, rivals: list[Fact], now: datetime, out: GraphWrite) -> Fact:
    """Close whichever of ``fact`` and each open contradicting fact began first."""
    for current in rivals:
        same = current.object_id == fact.object_id and fold_value(current.value) == fold_value(
            fact.value
        )
        if same:
            continue
        which, at = close_against(fact, current)
        if which == "old":
            if any(f.fact_id == current.fact_id for f in out.facts):  # one of this write's own
                out.facts = [
                    replace(f, invalid_at=at, expired_at=now, invalidated_by=fact.fact_id)
                    if f.fact_id == current.fact_id
                    else f
                    for f in out.facts
                ]
            else:
                out.closes.append(Close(current.fact_id, at, fact.fact_id))
            if fact.invalidates is None:
                fact = replace(fact, invalidates=current.fact_id)
        elif fact.invalid_at is None:
            fact = replace(fact, invalid_at=at, expired_at=now, invalidated_by=current.fact_id)
    return fact
