"""The documents plane's use cases (DOC-1): add, search, read, get, list and delete.

``add`` reads the content as text (:mod:`quipu.core.documents`), cuts it into verbatim chunks
with their character offsets, screens every chunk — a chunk holding a secret is *refused* (its
text is not stored; the answer reports its offsets and the secret's kind) and one that looks
like a prompt injection is *quarantined* (stored for review, never served) — embeds the rest
with the service's embedder and stores them in the scope's corpus, which pins the embedding
model and dimension on its first document. ``search`` ranks the corpus's chunks with the recall
pipeline (:mod:`quipu.retrieval.chunks` is its port) and answers pointers — document, chunk,
offsets, a bounded snippet with the matching span marked, score — never a whole body; ``read``
returns one bounded range, withheld chunks left out and named. Each call reads or writes
exactly one scope; authorisation, screening and audit come from the shared Guard.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

from quipu.core import documents as docs
from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.documents import (
    Chunk,
    ChunkStatus,
    Document,
    DocumentStatus,
    MediaType,
    StoredChunk,
)
from quipu.core.governance import ERASE_GRANT, subject_of
from quipu.core.query import Filters
from quipu.core.records import Principal, Role, ScopeRef
from quipu.core.scopes import check_write, resolve_scope
from quipu.documents_pdf import pdf_text
from quipu.errors import EmbeddingUnavailable, Forbidden, InvalidInput, NotFound
from quipu.governance.holds import Reach, erase_path, under_holds
from quipu.graph.documents import DocumentGraph, forget_document
from quipu.graph.service import GraphService
from quipu.guard import Guard, reason
from quipu.memories import MemoryService
from quipu.retrieval.bm25 import query_tokens, tokenize
from quipu.retrieval.chunks import ChunkPort
from quipu.retrieval.pipeline import RecallPipeline, RecallQuery
from quipu.safety import find_secrets, looks_like_injection
from quipu.storage.base import EmbeddingPin

#: Longest title, in characters.
MAX_TITLE_CHARS = 500
#: Chunks embedded in one call of the embedder (and one heartbeat of an ingest job).
EMBED_BATCH = 64


class Prepared(NamedTuple):
    """A document ready to store but for its vectors: its scope, record and screened chunks."""

    ref: ScopeRef
    document: Document
    chunks: tuple[Chunk, ...]


class DocumentService:
    """The documents use cases over the memory service's store, embedder and guard."""

    def __init__(
        self,
        memory: MemoryService,
        clock: Callable[[], datetime] | None = None,
        *,
        max_chunk_chars: int = docs.MAX_CHUNK_CHARS,
        overlap: int = docs.CHUNK_OVERLAP,
        embed_batch: int = EMBED_BATCH,
    ) -> None:
        self.store = memory.store
        self.embedder = memory.embedder
        self.guard: Guard = memory.guard
        self.limits = memory.limits
        self.max_chunk_chars = max_chunk_chars
        self.overlap = overlap
        self.embed_batch = embed_batch
        self._clock = clock or (lambda: datetime.now(UTC))
        self.port = ChunkPort(self.store)
        # Chunks have no sessions, dates or rerankable turns: those stages stay off.
        ranking = replace(self.limits, session_weight=0.0, temporal_boost=0.0)
        self.pipeline = RecallPipeline(self.port, self.embedder, ranking, self._clock)
        # DOC-1 / GRAPH-1: chunks of a document with entity metadata feed the entity graph
        # when the memory service builds it (the ``graph_extract`` setting).
        self.graph = DocumentGraph(memory.graph) if isinstance(memory.graph, GraphService) else None

    def close(self) -> None:
        self.pipeline.close()

    # -- writes ------------------------------------------------------------------------------
    def add(
        self,
        principal: Principal,
        content: object,
        *,
        title: object,
        media_type: object = "text/plain",
        scope: str = "agent",
        metadata: object = None,
        reason: object = None,
    ) -> dict[str, Any]:
        """Add a document; returns ``{document, chunks, served, refused, quarantined}``."""
        prepared = self.prepare(
            principal,
            content,
            title=title,
            media_type=media_type,
            scope=scope,
            metadata=metadata,
            reason=reason,
        )
        return self.commit(principal, prepared, self.embed(prepared.chunks))

    def prepare(
        self,
        principal: Principal,
        content: object,
        *,
        title: object,
        media_type: object = "text/plain",
        scope: str = "agent",
        metadata: object = None,
        reason: object = None,
    ) -> Prepared:
        """Everything of an add but the embedding and the write: the checks, the document's
        text cut into screened chunks, and its record (a durable ingest job embeds later)."""
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        kind = docs.media_type(media_type)
        text = self._text(content, kind)
        name = _title(title)
        meta = validate.metadata(metadata, max_bytes=self.limits.max_metadata_bytes)
        why = _reason(reason)
        if self.graph is not None:  # a malformed entity is a 4xx before anything is stored
            self.graph.entity(ref.tenant_id, meta)
        embedder = self._embedder()
        self.guard.admit_write(principal)
        chunks = [
            _screened(seq, start, end, text[start:end])
            for seq, (start, end) in enumerate(
                docs.chunk_spans(text, max_chars=self.max_chunk_chars, overlap=self.overlap)
            )
        ]
        document = Document(
            id=uuid.uuid4().hex,
            tenant_id=ref.tenant_id,
            scope=ref.scope,
            owner=ref.owner,
            title=name,
            media_type=kind,
            metadata=meta,
            chars=len(text),
            chunks=len(chunks),
            status=DocumentStatus.ACTIVE,
            version=1,
            actor=principal.key_id,
            surface=principal.surface,
            agent_id=principal.agent_id,
            recorded_at=self._clock(),
            embedding_model=embedder.model_id,
            reason=why,
            withheld=_withheld(chunks),
        )
        self.guard.screen(document)
        return Prepared(ref, document, tuple(chunks))

    def embed(
        self, chunks: Sequence[Chunk], done: Callable[[int], None] | None = None
    ) -> list[Any]:
        """The vector of each served chunk (``None`` for the others), in batches of
        ``embed_batch``; ``done(n)`` after each batch with the chunks embedded so far."""
        embedder = self._embedder()
        served = [c for c in chunks if c.status is ChunkStatus.ACTIVE]
        found: list[Any] = []
        step = self.embed_batch
        for at in range(0, len(served), step):
            found.extend(embedder.embed_batch([c.text for c in served[at : at + step]]))
            if done is not None:
                done(len(found))
        vectors = iter(found)
        return [next(vectors) if c.status is ChunkStatus.ACTIVE else None for c in chunks]

    def commit(
        self, principal: Principal, prepared: Prepared, vectors: Sequence[Any]
    ) -> dict[str, Any]:
        """Store a prepared document with its chunks' vectors, audited as ``document.add``."""
        ref, document, chunks = prepared
        embedder = self._embedder()
        document = replace(document, recorded_at=self._clock())
        audit = self._audit(
            principal, "document.add", document.id, document.reason, ref, len(chunks)
        )
        pin = EmbeddingPin(embedder.model_id, embedder.dimension)
        mirror = None if self.graph is None else self.graph.mirror(document, chunks)
        stored = self.store.doc_add(ref, document, chunks, vectors, pin, audit, graph=mirror)
        withheld = stored.withheld
        return {
            "document": stored.to_dict(),
            "chunks": len(chunks),
            "served": sum(c.status is ChunkStatus.ACTIVE for c in chunks),
            "refused": [w for w in withheld if w["status"] == "refused"],
            "quarantined": [w for w in withheld if w["status"] == "quarantined"],
        }

    def delete(
        self,
        principal: Principal,
        document_id: object,
        *,
        scope: str = "agent",
        reason: object = None,
    ) -> Document:
        """Delete a document logically (a new version, status ``deleted``; out of search)."""
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        ident = validate.identifier(document_id, field="document_id")
        why = _reason(reason)
        audit = self._audit(principal, "document.delete", ident, why, ref, None)
        found = self.store.doc_delete(ref, ident, audit, why)
        if found is None:
            raise _missing(ident)
        return found

    @erase_path("documents")
    def erase(
        self, principal: Principal, document_id: object, *, scope: str = "agent", reason: object
    ) -> dict[str, Any]:
        """Compliance erase (LIFE-4): the document's chunks (text and vectors) are deleted, its
        title and metadata wiped, and the reasons of the audit lines about it dropped; audited
        as ``document.erase`` with ``reason``. Needs an admin key or the ``memory:erase`` grant
        (403) and a reason (422 ``reason_required``); 409 ``legal_hold`` under a hold on the
        tenant or the scope's subject."""
        if principal.role not in (Role.ADMIN, Role.SUPERADMIN) and (
            ERASE_GRANT not in principal.grants
        ):
            raise Forbidden("erasing needs an admin key or the memory:erase grant")
        why = _reason(reason)
        if not why or not why.strip():
            raise InvalidInput("erasing needs a reason", code="reason_required")
        ref = resolve_scope(principal, scope)
        ident = validate.identifier(document_id, field="document_id")
        audit = self._audit(principal, "document.erase", ident, why, ref, None)
        found = self.store.doc_get(ref, ident)
        if found is None or found.status is DocumentStatus.ERASED:
            raise _missing(ident)
        with under_holds(self.store, Reach.of(ref.tenant_id, (), [subject_of(ref)])):
            forget_document(self.store, found)  # what the graph read from it goes first
            chunks = self.store.doc_erase(ref, ident, audit)
        return {"document_id": ident, "scope": ref.scope.value, "chunks_erased": chunks}

    # -- reads -------------------------------------------------------------------------------
    def get(self, principal: Principal, document_id: object, *, scope: str = "agent") -> Document:
        ref, _ = self._document(principal, document_id, scope)
        found = self.store.doc_get(ref, validate.identifier(document_id, field="document_id"))
        assert found is not None
        return found

    def list(
        self,
        principal: Principal,
        *,
        scope: str = "agent",
        cursor: object = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """The corpus's active documents, by id: check here before concluding something is not
        indexed. ``{items, next_cursor, corpus}``."""
        ref = resolve_scope(principal, scope)
        after = None if cursor is None else validate.identifier(cursor, field="cursor")
        size = self.guard.page_size(limit)
        items = self.store.doc_list(ref, after, size + 1)
        more = len(items) > size
        items = items[:size]
        corpus = self.store.doc_corpus(ref)
        return {
            "items": [d.to_dict() for d in items],
            "next_cursor": items[-1].id if more and items else None,
            "corpus": None
            if corpus is None
            else {"model": corpus[0].model_id, "dimension": corpus[0].dimension},
        }

    def search(
        self, principal: Principal, query: object, *, scope: str = "agent", k: int | None = None
    ) -> dict[str, Any]:
        """Pointers to the chunks that best answer ``query`` in one scope's corpus:
        ``{results: [{document_id, title, chunk_id, seq, start, end, snippet, match, score,
        rank}], meta}``. Never a whole body: a snippet is at most about 240 characters."""
        started = time.perf_counter()
        text = validate.query(query, max_chars=self.limits.max_query_chars)
        size = validate.bounded_int(
            self.limits.default_k if k is None else k, field="k", low=1, high=self.limits.max_k
        )
        ref = resolve_scope(principal, scope)
        corpus = self.store.doc_corpus(ref)
        if corpus is None:
            return {"results": [], "meta": _meta(ref, size, None, {})}
        embedder = self._embedder()
        docs.check_corpus(
            (corpus[0].model_id, corpus[0].dimension), (embedder.model_id, embedder.dimension)
        )
        found = self.pipeline.recall(RecallQuery(text, ref, Filters(), size), started)
        wanted = set(query_tokens(text))
        titles: dict[str, str] = {}
        results = []
        for hit in found.results:
            row = self.port.row(int(hit.memory.id))
            if row is None:
                continue
            results.append(self._pointer(ref, row, hit.score, hit.rank, wanted, titles))
        return {"results": results, "meta": _meta(ref, size, corpus[0], found.meta)}

    def read(
        self,
        principal: Principal,
        document_id: object,
        *,
        start: int = 0,
        end: int | None = None,
        scope: str = "agent",
    ) -> dict[str, Any]:
        """The document's text in ``[start, end)`` (at most :data:`MAX_READ_CHARS`; ``end``
        defaults to that far or the end). Spans of refused or quarantined chunks are never
        returned: ``parts`` holds the served pieces with their offsets, ``withheld`` the rest;
        ``text`` is the parts joined, each withheld span shown as ``[withheld: STATUS]``."""
        ref, document = self._document(principal, document_id, scope)
        low = validate.bounded_int(start, field="start", low=0, high=document.chars)
        high = min(document.chars, low + docs.MAX_READ_CHARS) if end is None else end
        high = validate.bounded_int(high, field="end", low=low, high=document.chars)
        if high - low > docs.MAX_READ_CHARS:
            raise InvalidInput(
                f"a read returns at most {docs.MAX_READ_CHARS} characters",
                code="range_too_large",
                details={"limit": docs.MAX_READ_CHARS},
            )
        chunks = self.store.doc_chunks(ref, document.id, low, high)
        parts, withheld = _assemble(chunks, low, high)
        text = "".join(
            p["text"] if "text" in p else f"[withheld: {p['status']}]"
            for p in sorted(parts + withheld, key=lambda p: int(p["start"]))
        )
        return {
            "document_id": document.id,
            "title": document.title,
            "start": low,
            "end": high,
            "chars": document.chars,
            "text": text,
            "parts": parts,
            "withheld": withheld,
        }

    # -- helpers -----------------------------------------------------------------------------
    def _embedder(self) -> Any:
        if self.embedder is None:
            raise EmbeddingUnavailable(
                "documents need an embedder and this store runs without one (embedder=none)",
                code="embedder_disabled",
            )
        return self.embedder

    def _text(self, content: object, kind: MediaType) -> str:
        if kind is MediaType.PDF:  # bytes in, its pages' text out (documents_pdf)
            content = pdf_text(content)
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(
                "content must be a non-blank string",
                code="invalid_text",
                details={"field": "content"},
            )
        if len(content) > 4 * docs.MAX_DOCUMENT_CHARS:
            raise _too_large(len(content))
        content = validate.clean_string(content, "content")
        text = docs.html_text(content) if kind is MediaType.HTML else content
        if not text.strip():
            raise InvalidInput(
                "the document holds no text", code="invalid_text", details={"field": "content"}
            )
        if len(text) > docs.MAX_DOCUMENT_CHARS:
            raise _too_large(len(text))
        return text

    def _document(
        self, principal: Principal, document_id: object, scope: str
    ) -> tuple[ScopeRef, Document]:
        ref = resolve_scope(principal, scope)
        ident = validate.identifier(document_id, field="document_id")
        found = self.store.doc_get(ref, ident)
        if found is None or found.status is not DocumentStatus.ACTIVE:
            raise _missing(ident)
        return ref, found

    def _pointer(
        self,
        ref: ScopeRef,
        row: StoredChunk,
        score: float,
        rank: int,
        wanted: set[str],
        titles: dict[str, str],
    ) -> dict[str, Any]:
        chunk = row.chunk
        shown, match = docs.snippet(chunk.text, chunk.start, wanted, _stem)
        if row.document_id not in titles:
            found = self.store.doc_get(ref, row.document_id)
            titles[row.document_id] = found.title if found is not None else ""
        return {
            "document_id": row.document_id,
            "title": titles[row.document_id],
            "chunk_id": f"{row.document_id}:{chunk.seq}",
            "seq": chunk.seq,
            "start": chunk.start,
            "end": chunk.end,
            "snippet": shown,
            "match": None if match is None else {"start": match[0], "end": match[1]},
            "score": round(score, 6),
            "rank": rank,
        }

    def _audit(
        self,
        principal: Principal,
        action: str,
        document_id: str,
        why: str | None,
        ref: ScopeRef,
        chunks: int | None,
    ) -> AuditEvent:
        details: dict[str, Any] = {"scope": ref.scope.value}
        if chunks is not None:
            details["chunks"] = chunks
        return AuditEvent(
            tenant_id=principal.tenant_id,
            at=self._clock(),
            actor_key=principal.key_id,
            surface=principal.surface,
            action=action,
            target_ids=(document_id,),
            role=principal.role.value,
            agent_id=principal.agent_id,
            user_id=principal.user_id,
            reason=why,
            details=details,
        )


def _withheld(chunks: Sequence[Chunk]) -> list[dict[str, Any]]:
    return [
        {"seq": c.seq, "start": c.start, "end": c.end, "status": c.status.value, "reason": c.reason}
        for c in chunks
        if c.status is not ChunkStatus.ACTIVE
    ]


def _screened(seq: int, start: int, end: int, text: str) -> Chunk:
    """A chunk, refused when it holds a secret (SAFE-1: its text is dropped), quarantined when
    it looks like a prompt injection (SAFE-2)."""
    secrets = find_secrets(text)
    if secrets:
        return Chunk(seq, start, end, "", ChunkStatus.REFUSED, secrets[0].kind)
    if looks_like_injection(text):
        return Chunk(seq, start, end, text, ChunkStatus.QUARANTINED, "injection")
    return Chunk(seq, start, end, text)


def _assemble(
    chunks: list[StoredChunk], low: int, high: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The served pieces of ``[low, high)`` and the withheld spans between them."""
    served = [c.chunk for c in chunks if c.chunk.status is ChunkStatus.ACTIVE]
    parts: list[dict[str, Any]] = []
    withheld: list[dict[str, Any]] = []
    at = low
    while at < high:
        cover = [c for c in served if c.start <= at < c.end]
        if cover:
            chunk = max(cover, key=lambda c: c.end)
            stop = min(chunk.end, high)
            piece = chunk.text[at - chunk.start : stop - chunk.start]
            if parts and parts[-1]["end"] == at:
                parts[-1]["text"] += piece
                parts[-1]["end"] = stop
            else:
                parts.append({"start": at, "end": stop, "text": piece})
            at = stop
            continue
        nxt = min((c.start for c in served if c.start > at), default=high)
        stop = min(nxt, high)
        gone = [c.chunk for c in chunks if c.chunk.start <= at < c.chunk.end]
        why = "missing"
        if gone:
            first = min(gone, key=lambda c: c.start)
            why, stop = first.status.value, min(stop, first.end)
        withheld.append({"start": at, "end": stop, "status": why})
        at = stop
    return parts, withheld


def _meta(
    ref: ScopeRef, size: int, pin: EmbeddingPin | None, found: dict[str, Any]
) -> dict[str, Any]:
    keep = ("total", "fallback", "reason", "underfilled", "paths", "timings")
    meta = {name: found[name] for name in keep if name in found}
    meta.setdefault("total", 0)
    return {
        **meta,
        "limit": size,
        "scope": ref.scope.value,
        "plane": "documents",
        "corpus": None if pin is None else {"model": pin.model_id, "dimension": pin.dimension},
    }


def _stem(word: str) -> str | None:
    keys = tokenize(word)
    return keys[0] if keys else None


def _title(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TITLE_CHARS:
        raise InvalidInput(
            f"title must be a non-blank string of at most {MAX_TITLE_CHARS} characters",
            code="invalid_title",
            details={"field": "title"},
        )
    return validate.clean_string(value, "title")


def _reason(value: object) -> str | None:
    return reason(value)


def _too_large(chars: int) -> InvalidInput:
    return InvalidInput(
        f"the document is {chars} characters; the limit is {docs.MAX_DOCUMENT_CHARS}",
        code="document_too_large",
        details={"chars": chars, "limit": docs.MAX_DOCUMENT_CHARS},
    )


def _missing(document_id: str) -> NotFound:
    return NotFound(f"no document {document_id}", details={"id": document_id})


class Documents:
    """The documents plane with the caller filled in: ``Quipu.documents`` of the embedded
    client. ``mem.documents.add(text, title="Manual")``, ``mem.documents.search("filter")``."""

    def __init__(self, service: DocumentService, principal: Principal) -> None:
        self.service = service
        self.principal = principal

    def add(
        self,
        content: str | bytes,
        *,
        title: str,
        media_type: str = "text/plain",
        scope: str = "agent",
        metadata: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        return self.service.add(
            self.principal,
            content,
            title=title,
            media_type=media_type,
            scope=scope,
            metadata=metadata,
            reason=reason,
        )

    def search(self, query: str, *, scope: str = "agent", k: int | None = None) -> dict[str, Any]:
        return self.service.search(self.principal, query, scope=scope, k=k)

    def read(
        self, document_id: str, *, start: int = 0, end: int | None = None, scope: str = "agent"
    ) -> dict[str, Any]:
        return self.service.read(self.principal, document_id, start=start, end=end, scope=scope)

    def get(self, document_id: str, *, scope: str = "agent") -> Document:
        return self.service.get(self.principal, document_id, scope=scope)

    def erase(self, document_id: str, *, scope: str = "agent", reason: str) -> dict[str, Any]:
        return self.service.erase(self.principal, document_id, scope=scope, reason=reason)

    def delete(
        self, document_id: str, *, scope: str = "agent", reason: str | None = None
    ) -> Document:
        return self.service.delete(self.principal, document_id, scope=scope, reason=reason)

    def list(
        self, *, scope: str = "agent", cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        return self.service.list(self.principal, scope=scope, cursor=cursor, limit=limit)
