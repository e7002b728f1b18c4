"""The entity graph's domain (GRAPH-1): entities, facts, resolution and time. Pure, no I/O.

An **entity** is a named thing in one scope partition (tenant, scope, owner), typed from an open
set (:data:`ENTITY_TYPES`, which a tenant may extend), with aliases and the first and last time
a memory mentioned it. A **fact** links a subject entity by a predicate to an object entity or a
literal value, with bi-temporal times (``valid_at``/``invalid_at`` in the world, ``recorded_at``
and ``expired_at`` in the store), its provenance and the memory version it was read from.

Facts are never edited. A fact whose predicate is single-valued (:data:`SINGLE_VALUED`, which a
tenant may extend) and whose object differs from a current fact about the same subject closes
that fact: its ``invalid_at`` becomes the newcomer's ``valid_at`` and the two are linked
(``invalidated_by`` / ``invalidates``), as Graphiti invalidates edges. Closing sets those three
columns once; nothing else about a fact ever changes.

Resolution (:func:`resolve`) matches a mention against the scope's entities in this order:

1. the folded name (NFKC, case fold, whitespace collapse, a leading "the " dropped) equals an
   entity's folded name or one of its folded aliases;
2. a single-word mention (person or untyped) equals the first word of exactly one person
   entity's name ("Caroline" and "Caroline Smith"), or the other way round;
3. the folded names are at least :data:`FUZZY_MIN_CHARS` long, share their first
   :data:`HEAD_CHARS` characters and their similarity (:func:`similarity`, difflib's ratio) is
   at least :data:`FUZZY_RATIO` ("Jon Snow" / "John Snow").

Types must agree unless one side is ``other``. Anything else is a new entity; a match by rule 2
or 3 adds the mention's name as an alias, so the next mention matches by rule 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from typing import Any, Literal, Protocol

from quipu.core.auth import Actor
from quipu.core.records import MemoryVersion, Principal, Scope, ScopeRef, WriteResult
from quipu.core.text import fold
from quipu.errors import InvalidInput

#: The built-in entity types; a tenant may declare more (:func:`type_name`).
ENTITY_TYPES = ("person", "place", "organisation", "product", "event", "date", "other")
#: Predicates that hold one object at a time: a new object closes the current fact.
SINGLE_VALUED = frozenset(
    {
        "lives_in",
        "works_at",
        "is_married_to",
        "is_dating",
        "is_from",
        "born_in",
        "studies_at",
        "has_job",
        "has_age",
    }
)
#: Resolution: the shortest folded name a fuzzy match may apply to.
FUZZY_MIN_CHARS = 6
#: Resolution: the fuzzy rule's minimum similarity (difflib ratio of the folded names).
FUZZY_RATIO = 0.88
#: Resolution: fuzzy candidates share this many leading characters (the ``head`` column).
HEAD_CHARS = 3
#: The longest entity name, literal value or alias, in characters.
MAX_NAME_CHARS = 200
#: The most hops a graph walk takes.
MAX_HOPS = 2
#: An ontology name: lowercase words joined by ``_`` (a type or a predicate).
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: The name of the scope owner's own entity ("I", "my" in an unattributed memory).
SELF_NAME = "user"

_THE = re.compile(r"^the\s+")


def folded_name(name: str) -> str:
    """The key names are matched on: :func:`quipu.core.text.fold` without a leading "the "."""
    return _THE.sub("", fold(name))


def head(folded: str) -> str:
    """The fuzzy-candidate key of a folded name: its first :data:`HEAD_CHARS` characters."""
    return folded[:HEAD_CHARS]


def similarity(a: str, b: str) -> float:
    """difflib's ratio of two folded names (1.0: equal)."""
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


def type_name(value: object, allowed: frozenset[str]) -> str:
    """A validated entity type: one of ``allowed`` (the built-ins plus the tenant's)."""
    name = ontology_name(value, field="type")
    if name not in allowed:
        raise InvalidInput(
            f"unknown entity type {name!r}",
            code="invalid_entity_type",
            details={"field": "type", "allowed": sorted(allowed)},
        )
    return name


def ontology_name(value: object, *, field: str) -> str:
    """A type or predicate name matching :data:`NAME_PATTERN`; 422 ``invalid_name`` else."""
    if not isinstance(value, str) or NAME_PATTERN.fullmatch(value) is None:
        raise InvalidInput(
            f"{field} must be lowercase letters, digits and _ (at most 40, starting with a letter)",
            code="invalid_name",
            details={"field": field},
        )
    return value


@dataclass(frozen=True)
class Ontology:
    """A tenant's entity types and single-valued predicates: the built-ins and its own."""

    types: frozenset[str] = frozenset(ENTITY_TYPES)
    single_valued: frozenset[str] = SINGLE_VALUED

    def with_declared(self, types: set[str], predicates: set[str]) -> Ontology:
        return Ontology(self.types | types, self.single_valued | predicates)


@dataclass(frozen=True)
class Mention:
    """An entity as the extractor found it in one memory's text."""

    name: str
    type: str


@dataclass(frozen=True)
class FactDraft:
    """A fact as the extractor found it: indexes into the mentions, or a literal object."""

    subject: int
    predicate: str
    object: int | None = None
    value: str | None = None


@dataclass(frozen=True)
class Extraction:
    """What one memory's text yields: its mentions and the facts among them."""

    mentions: tuple[Mention, ...] = ()
    facts: tuple[FactDraft, ...] = ()
    extractor: str = "graph-deterministic/1"


@dataclass(frozen=True)
class Source:
    """The memory version a fact or mention was read from, and who wrote it."""

    memory_id: str
    memory_version: int
    valid_at: datetime
    observed_at: datetime | None
    surface: str
    key_id: str | None


@dataclass(frozen=True)
class Entity:
    entity_id: str
    tenant_id: str
    scope: Scope
    owner: str
    name: str
    type: str
    aliases: tuple[str, ...]
    first_seen: datetime
    last_seen: datetime

    @property
    def folded(self) -> str:
        return folded_name(self.name)

    def to_dict(self) -> dict[str, Any]:
        """The wire form; the owner is never shown."""
        return {
            "entity_id": self.entity_id,
            "name": self.name,
            "type": self.type,
            "aliases": list(self.aliases),
            "scope": self.scope.value,
            "first_seen": self.first_seen.isoformat(),
            "last_seen": self.last_seen.isoformat(),
        }


@dataclass(frozen=True)
class Fact:
    fact_id: str
    tenant_id: str
    scope: Scope
    owner: str
    subject_id: str
    predicate: str
    object_id: str | None
    value: str | None
    valid_at: datetime
    invalid_at: datetime | None
    observed_at: datetime | None
    recorded_at: datetime
    expired_at: datetime | None
    """When the store learned ``invalid_at`` (None: it is open)."""
    memory_id: str
    memory_version: int
    extractor: str
    surface: str
    key_id: str | None
    invalidated_by: str | None = None
    invalidates: str | None = None

    def in_force(self, at: datetime | None) -> bool:
        """Whether the fact holds at ``at`` as the store knew it then (None: now, as known
        now): valid from ``valid_at``, recorded by then, and not closed by then."""
        if at is None:
            return self.invalid_at is None
        if self.valid_at > at or self.recorded_at > at:
            return False
        closed = self.invalid_at is not None and self.invalid_at <= at
        known = self.expired_at is None or self.expired_at <= at
        return not (closed and known)

    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.subject_id, self.predicate, self.object_id, fold_value(self.value))


def fold_value(value: str | None) -> str | None:
    return None if value is None else folded_name(value)


@dataclass
class Resolution:
    """Which entity each mention of one write became (filled in by the store)."""

    entity_ids: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)


def compatible(a: str, b: str) -> bool:
    return a == b or "other" in (a, b)


def resolve(mention: Mention, candidates: list[Entity]) -> tuple[Entity | None, bool]:
    """The entity ``mention`` names among ``candidates`` (the scope's entities sharing its
    folded name, an alias or its head) by the rules in the module docstring, and whether the
    mention's name should become an alias of it. (None, False): a new entity."""
    key = folded_name(mention.name)
    if not key:
        return None, False
    typed = [e for e in candidates if compatible(e.type, mention.type)]
    for entity in typed:
        if entity.folded == key or key in {folded_name(a) for a in entity.aliases}:
            return entity, False
    if mention.type in ("person", "other"):
        words = key.split(" ")
        firsts = [
            e
            for e in typed
            if e.type == "person"
            and (
                (len(words) == 1 and e.folded.split(" ")[0] == key)
                or (len(words) > 1 and e.folded == words[0])
            )
        ]
        if len(firsts) == 1:
            return firsts[0], True
    if len(key) >= FUZZY_MIN_CHARS:
        scored = [
            (similarity(key, e.folded), e.entity_id, e)
            for e in typed
            if head(e.folded) == head(key) and len(e.folded) >= FUZZY_MIN_CHARS
        ]
        scored = [s for s in scored if s[0] >= FUZZY_RATIO]
        if scored:
            return max(scored, key=lambda s: (s[0], s[1]))[2], True
    return None, False


def close_against(new: Fact, current: Fact) -> tuple[str, datetime]:
    """Which of two contradicting facts of a single-valued predicate is closed, and when:
    the one that began earlier ends where the other begins ("old" or "new")."""
    if current.valid_at <= new.valid_at:
        return "old", new.valid_at
    return "new", current.valid_at


#: How a memory version's graph mirror is written in its own transaction: ``new`` (a new
#: memory), ``replace`` (a revision changed the text: the earlier versions' open facts close and
#: their mentions go), ``fill`` (a memory becoming active: written only if it has no mirror yet).
MirrorMode = Literal["new", "replace", "fill"]


@dataclass(frozen=True)
class GraphDraft:
    """The graph mirror a store writes in a memory version's own transaction (GRAPH-1): the
    extractor to read the version's text with (or its extraction, computed beforehand for
    ``text``) and how to write it. A store writes it only when the version it stores is
    active; memory and graph rows then commit together or not at all."""

    extract: Callable[[str], Extraction]
    mode: MirrorMode = "new"
    text: str | None = None
    extraction: Extraction | None = None

    def read(self, text: str) -> Extraction:
        if self.extraction is not None and text == self.text:
            return self.extraction
        return self.extract(text)


class GraphSink(Protocol):
    """What the memory service asks the entity graph for (:class:`quipu.graph.service.
    GraphService`); ``MemoryService.graph`` is one when the ``graph_extract`` setting is on
    (the composition root sets it), else None."""

    def observe(self, memory: MemoryVersion, *, fill: bool = False) -> object:
        """Write a stored version's mirror on its own (``fill``: unless it has one)."""
        ...

    def imported(self, memories: Iterable[MemoryVersion]) -> None:
        """Write the mirror of each current active memory an import stored (unless it has one)."""
        ...

    def draft(self, mode: MirrorMode, text: str | None = None) -> GraphDraft:
        """The mirror to write with a memory version (``text``: extract it now, before the
        store's transaction opens)."""
        ...


#: Separates a document id from a chunk's seq in a graph source id (never in a memory id).
CHUNK_SOURCE_MARK = "#"


def chunk_source(document_id: str, seq: int) -> str:
    """The source id of graph rows read from chunk ``seq`` of a document (DOC-1): a ``#`` is
    never in a memory id (:data:`quipu.core.validate.ID_PATTERN`)."""
    return f"{document_id}{CHUNK_SOURCE_MARK}{seq}"


def parse_chunk_source(source_id: str) -> tuple[str, int] | None:
    """``(document_id, seq)`` of a chunk source id; None for a memory id."""
    document_id, mark, seq = source_id.partition(CHUNK_SOURCE_MARK)
    if not mark or not seq.isdigit():
        return None
    return document_id, int(seq)


class PlacementSink(Protocol):
    """Where the memory service stores a new memory when the tenant may place it by ontology
    (GRAPH-2; :meth:`quipu.graph.placement.Placement.write`): the memory row and its graph
    mirror in the scope the policy decides, in one transaction. Answers the scope it landed in
    and the insert's result, or None (nothing written) when the tenant's policy places nothing:
    the memory service then writes the memory and its mirror itself. ``MemoryService.placement``
    is one when the composition root sets it, else None."""

    def write(
        self,
        principal: Principal,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Any,
        key: str | None,
        by: Actor,
    ) -> tuple[ScopeRef, WriteResult] | None: ...

    def revise(
        self,
        principal: Principal,
        ref: ScopeRef,
        memory_id: str,
        text: str,
        write: Callable[[], MemoryVersion],
    ) -> MemoryVersion | None:
        """A revision of a placed memory: the checks again, then ``write()`` in the same
        transaction (409 ``placement_refused`` when a check refuses); None when the memory was
        not placed (nothing written: the caller appends)."""
        ...


@dataclass(frozen=True)
class ChunkMirror:
    """The graph rows of a document's served chunks (DOC-1, GRAPH-1), written by the store in
    the document's own transaction (``doc_add(..., graph=...)``): the document, its chunks
    and their graph rows commit together or not at all. ``chunks`` holds each served chunk's
    extraction and source (``<document_id>#<seq>``), in order; ``ontology`` is the tenant's."""

    ontology: Ontology
    chunks: tuple[tuple[Extraction, Source], ...]
