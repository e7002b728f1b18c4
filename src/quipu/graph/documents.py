"""Document chunks that carry entity metadata feed the entity graph (DOC-1, GRAPH-1).

A document is prose unless its metadata names what it is about::

    {"entity": {"name": "Atlas Router X2", "type": "product", "fact_class": "manual"}}

Then every served chunk of it takes part in the graph, in the document's own scope partition:

- the named entity (``type`` one of the tenant's entity types, default ``other``) is mentioned by
  each served chunk, so a graph walk reaches every chunk about it;
- the entities and facts the deterministic extractor reads in the chunk's text are written as
  for a memory, except the first person: a document's "I" is its author, not the scope's owner,
  so the owner's own entity is never mentioned by a chunk;
- a ``mentions`` fact links the entity to each entity a chunk names (at most 20 a chunk), so a
  walk from it reaches what its documents say;
- one fact states where the entity is described: ``<entity> <fact_class> "<title>"``
  (``fact_class`` an ontology name, default ``described_in``), from the first served chunk.

A chunk's graph rows name it as their source as ``<document_id>#<seq>`` (a ``#`` is never in a
memory id, :data:`quipu.core.validate.ID_PATTERN`); they are read only while the document is
active (the stores' active-source rule), and erasing the document deletes them before its
chunks. The rows are written in the document's own transaction: the document and its graph
rows commit together or not at all. Refused and quarantined chunks are never read. A document
without ``entity`` metadata, or a store whose ``graph_extract`` setting is off, writes nothing
to the graph.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from quipu.core import validate
from quipu.core.documents import Chunk, ChunkStatus, Document
from quipu.core.graph import (
    MAX_NAME_CHARS,
    SELF_NAME,
    ChunkMirror,
    Extraction,
    FactDraft,
    Mention,
    Source,
    chunk_source,
    folded_name,
    ontology_name,
    type_name,
)
from quipu.errors import InvalidInput
from quipu.graph.extract import EXTRACTOR_ID, extract
from quipu.graph.service import GraphService

#: The metadata key that makes a document's chunks take part in the graph.
ENTITY_KEY = "entity"
#: The predicate of the "described in" fact when the metadata names no ``fact_class``.
DEFAULT_FACT_CLASS = "described_in"
#: The extractor id graph rows read from a document chunk carry.
CHUNK_EXTRACTOR = f"{EXTRACTOR_ID}+document"
#: Markdown heading lines: structure, not sentences (the extractor would read a title's
#: capitalised words as names).
_HEADING = re.compile(r"^[ ]{0,3}#{1,6}[ \t].*$", re.MULTILINE)
#: The predicate linking the document's entity to each entity one of its chunks names.
MENTIONS = "mentions"
#: ``mentions`` facts one chunk adds at most.
MAX_MENTIONS_FACTS = 20
#: Chunk source ids one graph_forget statement names at most.
FORGET_BATCH = 500


@dataclass(frozen=True)
class DocumentEntity:
    """What a document's ``entity`` metadata names."""

    name: str
    type: str
    fact_class: str


def document_entity(metadata: Mapping[str, Any], types: frozenset[str]) -> DocumentEntity | None:
    """The entity a document's metadata names (None: none); 422 ``invalid_entity_metadata``
    for a malformed one, ``invalid_entity_type`` for a type the tenant has not declared."""
    found = metadata.get(ENTITY_KEY)
    if found is None:
        return None
    if not isinstance(found, Mapping) or set(found) - {"name", "type", "fact_class"}:
        raise _bad("metadata.entity must be {name, and optionally type and fact_class}")
    name = found.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise _bad(f"metadata.entity.name must be a name of 1 to {MAX_NAME_CHARS} characters")
    name = validate.clean_string(" ".join(name.split()), "metadata.entity.name")
    if not folded_name(name) or folded_name(name) == SELF_NAME:
        raise _bad("metadata.entity.name must name something other than the scope's owner")
    kind = found.get("type", "other")
    fact_class = found.get("fact_class", DEFAULT_FACT_CLASS)
    return DocumentEntity(
        name=name,
        type=type_name(kind, types),
        fact_class=ontology_name(fact_class, field="metadata.entity.fact_class"),
    )


def chunk_extraction(entity: DocumentEntity, chunk: Chunk, title: str | None) -> Extraction:
    """What one served chunk adds to the graph: the document's entity, what the extractor
    reads in its text (the owner's own entity left out) and, with ``title``, the "described
    in" fact."""
    read = extract(_HEADING.sub("", chunk.text))
    mentions: list[Mention] = [Mention(entity.name, entity.type)]
    index: dict[int, int] = {}
    for at, mention in enumerate(read.mentions):
        if folded_name(mention.name) == SELF_NAME:
            continue
        index[at] = len(mentions)
        mentions.append(mention)
    facts = [
        FactDraft(
            subject=index[d.subject],
            predicate=d.predicate,
            object=None if d.object is None else index[d.object],
            value=d.value,
        )
        for d in read.facts
        if d.subject in index and (d.object is None or d.object in index)
    ]
    named = sorted(set(index.values()))[:MAX_MENTIONS_FACTS]
    facts.extend(FactDraft(subject=0, predicate=MENTIONS, object=at) for at in named)
    if title:
        facts.insert(0, FactDraft(subject=0, predicate=entity.fact_class, value=title))
    return Extraction(tuple(mentions), tuple(facts), CHUNK_EXTRACTOR)


class DocumentGraph:
    """Writes and forgets the graph rows of documents with entity metadata."""

    def __init__(self, graph: GraphService) -> None:
        self.graph = graph
        self.store = graph.store

    def entity(self, tenant_id: str, metadata: Mapping[str, Any]) -> DocumentEntity | None:
        """Validate a document's entity metadata against the tenant's ontology (before any
        write, so a bad one is the caller's 4xx and nothing is stored)."""
        if ENTITY_KEY not in metadata:
            return None
        return document_entity(metadata, self.graph.ontology(tenant_id).types)

    def mirror(self, document: Document, chunks: Sequence[Chunk]) -> ChunkMirror | None:
        """The graph rows of a document's served chunks, for the store to write in the
        document's own transaction (``doc_add(..., graph=...)``); None when its metadata names
        no entity."""
        entity = self.entity(document.tenant_id, document.metadata)
        if entity is None:
            return None
        served = [c for c in chunks if c.status is ChunkStatus.ACTIVE and c.text]
        rows = tuple(
            (
                chunk_extraction(entity, chunk, document.title if at == 0 else None),
                Source(
                    memory_id=chunk_source(document.id, chunk.seq),
                    memory_version=document.version,
                    valid_at=document.recorded_at,
                    observed_at=None,
                    surface=document.surface,
                    key_id=document.actor,
                ),
            )
            for at, chunk in enumerate(served)
        )
        return ChunkMirror(self.graph.ontology(document.tenant_id), rows)


class _Forgets(Protocol):
    def graph_forget(self, tenant_id: str, memory_ids: Sequence[str]) -> int: ...


def forget_document(store: _Forgets, document: Document) -> int:
    """Delete the graph rows read from a document's chunks; how many facts went. Erase paths
    call it before the document's chunks go (an erase that stops half-way runs again), and
    whatever the ``graph_extract`` setting is now: it may have been on when the document was
    added."""
    ids = [chunk_source(document.id, seq) for seq in range(max(0, document.chunks))]
    gone = 0
    for at in range(0, len(ids), FORGET_BATCH):
        gone += store.graph_forget(document.tenant_id, ids[at : at + FORGET_BATCH])
    return gone


def _bad(message: str) -> InvalidInput:
    return InvalidInput(
        message, code="invalid_entity_metadata", details={"field": f"metadata.{ENTITY_KEY}"}
    )
