"""The entity graph's use cases (GRAPH-1): write-time extraction, ``graph_recall``,
``list_facts`` and the tenant's ontology.

**Writes.** The memory service asks :meth:`GraphService.draft` for the mirror of each version
it writes (a new memory, a revision, a candidate or quarantined memory becoming active; see
:class:`quipu.core.graph.GraphSink`): the text is read by the deterministic extractor
(:mod:`quipu.graph.extract`, no model call) and the store writes the entities and facts in the
memory's scope partition *in the memory version's own transaction*, each fact naming the
memory and version it came from: the memory and its graph rows commit together or not at all.
:meth:`GraphService.observe` writes the mirror of an already stored version on its own (the
backfill, :mod:`quipu.graph.backfill`).

**Reads.** One scope per call, resolved from the principal like every read (SCOPE-1); an entity
of another scope, agent or tenant is simply not found. A fact is read only while its source
memory's current version is active (a forgotten, quarantined or erased memory's facts are not).
``graph_recall`` finds the entities the query names (exact name or alias, a unique first name,
a fuzzy match: :func:`quipu.core.graph.resolve`), walks at most two hops of facts from them and
returns the facts in force now or ``as_of``, each with its source memory ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from quipu.core import validate
from quipu.core.graph import (
    FUZZY_MIN_CHARS,
    MAX_HOPS,
    MAX_NAME_CHARS,
    Entity,
    Fact,
    GraphDraft,
    Mention,
    MirrorMode,
    Ontology,
    folded_name,
    head,
    ontology_name,
    parse_chunk_source,
    resolve,
)
from quipu.core.records import MemoryVersion, Principal, Role, ScopeRef, Status
from quipu.core.scopes import resolve_scope
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.graph.extract import extract
from quipu.graph.query import query_names
from quipu.guard import Guard
from quipu.memories import MemoryService
from quipu.storage.graph_rows import GraphWrite, source_of

#: Facts a walk reads per hop at most (a hub entity cannot make a read unbounded).
HOP_FACTS = 500
#: The most facts or entities one answer holds.
MAX_LIMIT = 200
DEFAULT_LIMIT = 20


@dataclass(frozen=True)
class FactView:
    """A fact as read: its subject and object by name, and every memory that states it."""

    fact: Fact
    subject: Entity
    object: Entity | None
    memory_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        f = self.fact
        return {
            "fact_id": f.fact_id,
            "subject": self.subject.name,
            "subject_id": f.subject_id,
            "predicate": f.predicate,
            "object": None if self.object is None else self.object.name,
            "object_id": f.object_id,
            "value": f.value,
            "valid_at": f.valid_at.isoformat(),
            "invalid_at": None if f.invalid_at is None else f.invalid_at.isoformat(),
            "observed_at": None if f.observed_at is None else f.observed_at.isoformat(),
            "recorded_at": f.recorded_at.isoformat(),
            "current": f.invalid_at is None,
            "invalidated_by": f.invalidated_by,
            "invalidates": f.invalidates,
            "memory_id": f.memory_id,
            "memory_version": f.memory_version,
            "memory_ids": [m for m in self.memory_ids if parse_chunk_source(m) is None],
            "provenance": {"extractor": f.extractor, "surface": f.surface},
            "documents": _chunk_sources(self.memory_ids),
        }


@dataclass
class GraphAnswer:
    """What ``graph_recall`` and ``list_facts`` answer."""

    entities: list[Entity] = field(default_factory=list)
    facts: list[FactView] = field(default_factory=list)
    matched: dict[str, str] = field(default_factory=dict)
    """Each seed entity's id and the query name that named it."""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def memory_ids(self) -> list[str]:
        """The source memories of the facts, in the order the facts come (document chunks,
        a fact's other kind of source, are listed under each fact's ``documents``)."""
        seen: dict[str, None] = {}
        for view in self.facts:
            for ident in view.memory_ids:
                if parse_chunk_source(ident) is None:
                    seen.setdefault(ident, None)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entities": [
                {**e.to_dict(), "matched": self.matched.get(e.entity_id)} for e in self.entities
            ],
            "facts": [f.to_dict() for f in self.facts],
            "memory_ids": self.memory_ids,
            "meta": self.meta,
        }


class GraphService:
    """The entity graph's use cases over the memory service's store and guard."""

    def __init__(self, memory: MemoryService, clock: Callable[[], datetime] | None = None) -> None:
        self.store = memory.store
        self.guard: Guard = memory.guard
        self._clock = clock or (lambda: datetime.now(UTC))

    def clock(self) -> datetime:
        return self._clock()

    # -- writes ------------------------------------------------------------------------------
    def draft(self, mode: MirrorMode, text: str | None = None) -> GraphDraft:
        """The mirror the store writes with a memory version, in its transaction; ``text``
        is extracted now, before that transaction opens."""
        return GraphDraft(extract, mode, text, None if text is None else extract(text))

    def imported(self, memories: Iterable[MemoryVersion]) -> None:
        """Mirror each current active memory an import stored, unless it already has one."""
        for memory in memories:
            if memory.is_current:
                self.observe(memory, fill=True)

    def observe(self, memory: MemoryVersion, *, fill: bool = False) -> GraphWrite | None:
        """Extract and write the graph of a stored memory version in its own transaction
        (None: nothing written: the memory is not active, its text names nothing, or with
        ``fill`` it already has graph rows)."""
        if memory.status is not Status.ACTIVE:
            return None
        extraction = extract(memory.text)
        if not extraction.mentions:
            return None
        ref = ScopeRef(memory.tenant_id, memory.scope, memory.owner)
        return self.store.graph_write(
            ref, extraction, source_of(memory), self._clock(), None, fill=fill
        )

    def ontology(self, tenant_id: str) -> Ontology:
        types, predicates = self.store.graph_ontology(tenant_id)
        return Ontology().with_declared(types, predicates)

    def declare(
        self, principal: Principal, *, types: object = None, predicates: object = None
    ) -> dict[str, list[str]]:
        """Add entity types and single-valued predicates to the tenant's ontology (admin keys
        only: 403 ``forbidden``); audited as ``graph.declare``. Returns the whole ontology
        (with nothing to add, any key may read it)."""
        new_types = _names(types, "types")
        new_predicates = _names(predicates, "predicates")
        if (new_types or new_predicates) and principal.role not in (Role.ADMIN, Role.SUPERADMIN):
            raise Forbidden("declaring the graph's ontology needs an admin key")
        now = self._clock()
        for name in new_types:
            self.store.graph_declare(principal.tenant_id, "type", name, principal.key_id, now)
        for name in new_predicates:
            self.store.graph_declare(principal.tenant_id, "predicate", name, principal.key_id, now)
        if new_types or new_predicates:
            self.guard.audit(
                principal,
                "graph.declare",
                (*new_types, *new_predicates),
                details={"types": new_types, "predicates": new_predicates},
            )
        found = self.ontology(principal.tenant_id)
        return {"types": sorted(found.types), "single_valued": sorted(found.single_valued)}

    # -- reads -------------------------------------------------------------------------------
    def recall(
        self,
        principal: Principal,
        query: object,
        *,
        scope: str = "agent",
        hops: object = 1,
        limit: object = None,
        as_of: object = None,
        include_invalidated: bool = False,
    ) -> GraphAnswer:
        """The entities ``query`` names in the scope, the facts within ``hops`` (0..2) of
        them in force now (or ``as_of``), best-connected first, at most ``limit``."""
        text = validate.query(query, max_chars=self.guard.limits.max_query_chars)
        ref = resolve_scope(principal, scope)
        depth = validate.bounded_int(hops, field="hops", low=0, high=MAX_HOPS)
        size = _limit(limit)
        at = validate.instant(as_of, field="as_of")
        seeds = self._seeds(ref, query_names(text))
        answer = GraphAnswer(matched={e.entity_id: name for name, e in seeds})
        frontier = list(dict.fromkeys(e.entity_id for _, e in seeds))
        known: dict[str, Entity] = {e.entity_id: e for _, e in seeds}
        chosen: dict[str, Fact] = {}
        for _ in range(depth):
            if not frontier:
                break
            facts = [
                f
                for f in self.store.graph_facts(ref, frontier, HOP_FACTS)
                if include_invalidated or f.in_force(at)
            ]
            nxt: list[str] = []
            for f in facts:
                chosen.setdefault(f.fact_id, f)
                for end in (f.subject_id, f.object_id):
                    if end is not None and end not in known and end not in nxt:
                        nxt.append(end)
            for entity in self.store.graph_entities(ref, nxt):
                known[entity.entity_id] = entity
            frontier = [e for e in nxt if e in known]
        answer.entities = list(known.values())[:size]
        answer.facts = self._views(ref, list(chosen.values()), known)[:size]
        answer.meta = {
            "scope": ref.scope.value,
            "hops": depth,
            "seeds": len(seeds),
            "as_of": None if at is None else at.isoformat(),
        }
        return answer

    def facts(
        self,
        principal: Principal,
        subject: object,
        *,
        scope: str = "agent",
        as_of: object = None,
        include_invalidated: bool = False,
        limit: object = None,
    ) -> GraphAnswer:
        """What is known about ``subject`` (a name, alias or entity id): its facts in force
        now, or ``as_of``, or with ``include_invalidated`` every fact ever recorded. 404
        ``not_found`` when the scope holds no such entity."""
        name = _subject(subject)
        ref = resolve_scope(principal, scope)
        at = validate.instant(as_of, field="as_of")
        size = _limit(limit)
        if not isinstance(include_invalidated, bool):
            raise InvalidInput(
                "include_invalidated must be true or false",
                code="invalid_input",
                details={"field": "include_invalidated"},
            )
        found = self.store.graph_entities(ref, [name]) or [e for _, e in self._seeds(ref, [name])]
        if not found:
            raise NotFound(f"no entity {name!r} in this scope", details={"subject": name})
        entity = found[0]
        facts = [
            f
            for f in self.store.graph_facts(ref, [entity.entity_id], HOP_FACTS)
            if f.subject_id == entity.entity_id and (include_invalidated or f.in_force(at))
        ]
        others = {f.object_id for f in facts if f.object_id is not None}
        known = {entity.entity_id: entity}
        known.update({e.entity_id: e for e in self.store.graph_entities(ref, sorted(others))})
        views = self._views(ref, facts, known, group=not include_invalidated)
        return GraphAnswer(
            entities=[entity],
            facts=views[:size],
            matched={entity.entity_id: name},
            meta={
                "scope": ref.scope.value,
                "as_of": None if at is None else at.isoformat(),
                "include_invalidated": include_invalidated,
                "total": len(views),
            },
        )

    # -- helpers -----------------------------------------------------------------------------
    def _seeds(self, ref: ScopeRef, names: Sequence[str]) -> list[tuple[str, Entity]]:
        keys = [folded_name(n) for n in names if folded_name(n)]
        if not keys:
            return []
        fuzzy = sorted({head(k) for k in keys if len(k) >= FUZZY_MIN_CHARS})
        pool = self.store.graph_lookup(ref, keys, fuzzy)
        seeds: list[tuple[str, Entity]] = []
        for name in names:
            entity, _ = resolve(Mention(name, "other"), pool)
            if entity is not None and all(entity.entity_id != e.entity_id for _, e in seeds):
                seeds.append((name, entity))
        return seeds

    def _views(
        self,
        ref: ScopeRef,
        facts: list[Fact],
        known: dict[str, Entity],
        *,
        group: bool = True,
    ) -> list[FactView]:
        """Facts with their ends by name; with ``group``, the same statement from several
        memories is one row naming every memory (the newest row stands for it)."""
        missing = sorted(
            {e for f in facts for e in (f.subject_id, f.object_id) if e and e not in known}
        )
        if missing:
            known.update({e.entity_id: e for e in self.store.graph_entities(ref, missing)})
        rows: dict[object, tuple[Fact, list[str]]] = {}
        for f in sorted(facts, key=lambda f: (f.recorded_at, f.fact_id), reverse=True):
            key: object = (f.key(), f.invalid_at is None) if group else f.fact_id
            if key in rows:
                rows[key][1].append(f.memory_id)
            else:
                rows[key] = (f, [f.memory_id])
        views = []
        for f, memories in rows.values():
            subject = known.get(f.subject_id)
            obj = None if f.object_id is None else known.get(f.object_id)
            if subject is None or (f.object_id is not None and obj is None):
                continue
            views.append(FactView(f, subject, obj, tuple(dict.fromkeys(memories))))
        return views


def _chunk_sources(ids: Sequence[str]) -> list[dict[str, Any]]:
    """The document chunks among a fact's sources, as ``{document_id, seq}`` (DOC-1)."""
    found = [parse_chunk_source(i) for i in ids]
    return [{"document_id": d, "seq": seq} for d, seq in (f for f in found if f is not None)]


def _limit(value: object) -> int:
    if value is None:
        return DEFAULT_LIMIT
    return validate.bounded_int(value, field="limit", low=1, high=MAX_LIMIT)


def _subject(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
        raise InvalidInput(
            f"subject must be a name or entity id of 1 to {MAX_NAME_CHARS} characters",
            code="invalid_subject",
            details={"field": "subject"},
        )
    return validate.clean_string(value.strip(), "subject")


def _names(value: object, field_name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple) or len(value) > 50:
        raise InvalidInput(
            f"{field_name} must be a list of at most 50 names",
            code="invalid_name",
            details={"field": field_name},
        )
    return sorted({ontology_name(v, field=field_name) for v in value})


class Graph:
    """The entity graph with the caller filled in: ``Quipu.graph`` of the embedded client.

    ``mem.graph.recall("Where does Anna work?")``, ``mem.graph.facts("Anna")``."""

    def __init__(self, service: GraphService, principal: Principal) -> None:
        self.service = service
        self.principal = principal

    def recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        hops: int = 1,
        limit: int | None = None,
        as_of: object = None,
    ) -> GraphAnswer:
        return self.service.recall(
            self.principal, query, scope=scope, hops=hops, limit=limit, as_of=as_of
        )

    def facts(
        self,
        subject: str,
        *,
        scope: str = "agent",
        as_of: object = None,
        include_invalidated: bool = False,
        limit: int | None = None,
    ) -> GraphAnswer:
        return self.service.facts(
            self.principal,
            subject,
            scope=scope,
            as_of=as_of,
            include_invalidated=include_invalidated,
            limit=limit,
        )

    def declare(
        self, *, types: Sequence[str] | None = None, predicates: Sequence[str] | None = None
    ) -> dict[str, list[str]]:
        return self.service.declare(
            self.principal,
            types=None if types is None else list(types),
            predicates=None if predicates is None else list(predicates),
        )
