"""The entity graph's write step, once for both backends (GRAPH-1).

:func:`write_extraction` runs inside a backend's write transaction over a :class:`GraphSQL`
(one batched read and one batched write, in the backend's dialect): resolve each mention to an
entity of the scope (:func:`quipu.core.graph.resolve`), record the mention, then append each
fact, closing the open fact of a single-valued predicate it contradicts
(:func:`quipu.core.graph.close_against`). :func:`mirror` is the same step for a memory version
being written in that transaction (a store's ``insert``/``append`` with a
:class:`~quipu.core.graph.GraphDraft`): the memory and its graph rows commit together.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from quipu.core.graph import (
    ChunkMirror,
    Entity,
    Extraction,
    Fact,
    GraphDraft,
    MirrorMode,
    Ontology,
    Source,
    close_against,
    fold_value,
    folded_name,
    head,
    resolve,
)
from quipu.core.records import MemoryVersion, ScopeRef, Status


@dataclass
class Snapshot:
    """What one batched read returns: the resolution candidates, their open facts of a
    single-valued predicate, the tenant's declared types and single-valued predicates, and
    whether the memory being written already has graph rows (mentions)."""

    entities: list[Entity]
    open_facts: list[Fact]
    types: set[str] = field(default_factory=set)
    predicates: set[str] = field(default_factory=set)
    mirrored: bool = False


class GraphSQL(Protocol):
    """The statements :func:`write_extraction` needs, on one open transaction: one batched
    read, then one batched write (a backend sends each in as few round trips as it can)."""

    def read(
        self,
        ref: ScopeRef,
        folded: Sequence[str],
        heads: Sequence[str],
        predicates: Sequence[str],
        memory_id: str | None,
    ) -> Snapshot:
        """The resolution candidates (entities whose folded name or alias is in ``folded`` or
        whose head is in ``heads``; at most 500), their open facts (no ``invalid_at``) whose
        predicate is in ``predicates`` or declared single-valued by the tenant, the tenant's
        declared ontology, and whether ``memory_id`` (None: not asked) has mentions."""

    def apply(
        self, ref: ScopeRef, plan: GraphWrite, source: Source, now: datetime, retire: bool
    ) -> None:
        """With ``retire``, first close the open facts of ``source``'s earlier versions
        (``invalid_at`` = ``source.valid_at``) and drop its mentions; then insert
        ``plan.new_entities``, set ``last_seen``, type and aliases (and their index rows) of
        ``plan.touched``, record a mention of ``source`` for each of ``plan.entity_ids``,
        insert ``plan.facts`` and close ``plan.closes``."""


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


def source_of(memory: MemoryVersion) -> Source:
    """The provenance a memory version gives the graph rows read from it."""
    return Source(
        memory_id=memory.id,
        memory_version=memory.version,
        valid_at=memory.valid_at,
        observed_at=memory.observed_at,
        surface=memory.provenance.surface,
        key_id=memory.provenance.key_id,
    )


def same_text(
    draft: GraphDraft | None, current: MemoryVersion, new: MemoryVersion
) -> GraphDraft | None:
    """The draft for ``new`` appended after ``current``: a ``replace`` whose text did not
    change only fills a missing mirror."""
    if draft is not None and draft.mode == "replace" and new.text == current.text:
        return replace(draft, mode="fill")
    return draft


def mirror(
    sql: GraphSQL,
    ref: ScopeRef,
    memory: MemoryVersion,
    draft: GraphDraft | None,
    now: datetime,
    gate: Callable[[], bool] | None = None,
) -> GraphWrite | None:
    """Write ``memory``'s graph mirror by ``draft`` in the caller's open transaction (None:
    no draft, the version is not active, or nothing was written).

    A ``replace`` (a new text) that is not active — a revision quarantined by the injection
    screen, or written as a candidate — still retires the earlier versions' facts and
    mentions: they no longer say what the memory says, and the reviewer's release (a ``fill``)
    then reads the released version's own text instead of finding the first one's mirror."""
    if draft is None:
        return None
    if memory.status is not Status.ACTIVE:
        if draft.mode != "replace":
            return None
        retire = Extraction()  # nothing new: only the retire
        return write_extraction(
            sql, ref, retire, source_of(memory), now, None, mode="replace", gate=gate
        )
    return write_extraction(
        sql, ref, draft.read(memory.text), source_of(memory), now, None, mode=draft.mode, gate=gate
    )


def write_extraction(
    sql: GraphSQL,
    ref: ScopeRef,
    extraction: Extraction,
    source: Source,
    now: datetime,
    ontology: Ontology | None,
    *,
    mode: MirrorMode = "new",
    gate: Callable[[], bool] | None = None,
) -> GraphWrite | None:
    """Resolve, plan and write one extraction (None: nothing written: ``gate`` said no after
    the read, ``fill`` found the memory already mirrored, or a ``new`` memory names nothing).
    ``ontology`` None: the built-ins and what the tenant declared, read in the same round
    trip."""
    if not extraction.mentions and mode != "replace":
        return None
    keys = [folded_name(m.name) for m in extraction.mentions]
    folded, heads = sorted(set(keys)), sorted({head(k) for k in keys if k})
    base = ontology or Ontology()
    asked = source.memory_id if mode == "fill" else None  # only a fill asks if it is mirrored
    snap = sql.read(ref, folded, heads, sorted(base.single_valued), asked)
    if gate is not None and not gate():
        return None
    if mode == "fill" and snap.mirrored:
        return None
    ontology = base.with_declared(snap.types, snap.predicates)
    pool = snap.entities
    out = GraphWrite()
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
    wanted = {(f.subject_id, f.predicate) for f in drafts if f.predicate in ontology.single_valued}
    retire = mode == "replace"
    open_now = [
        f
        for f in snap.open_facts
        if (f.subject_id, f.predicate) in wanted
        and f.predicate in ontology.single_valued
        and not (retire and f.memory_id == source.memory_id)  # closed by the revision itself
    ]
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
    sql.apply(ref, out, source, now, retire)
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


def mirror_chunks(sql: GraphSQL, ref: ScopeRef, graph: ChunkMirror | None, now: datetime) -> int:
    """Write a document's chunk mirror (DOC-1) in the caller's open transaction, the one that
    stores the document; how many chunks wrote graph rows."""
    if graph is None:
        return 0
    return sum(
        write_extraction(sql, ref, extraction, source, now, graph.ontology) is not None
        for extraction, source in graph.chunks
    )
