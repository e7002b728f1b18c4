"""The documents plane's search port (DOC-1): the :class:`~quipu.retrieval.pipeline.SearchPort`
the recall pipeline reads when it searches a scope's document corpus, so documents are ranked
by the same stages as memories (vector and BM25 candidates, score fusion, the feedback pass)
instead of a copy of them.

Each corpus is held in this process as a :class:`ChunkIndex` (the served chunks' unit vectors
as one matrix, exact cosine, and a BM25 postings index with the corpus's own statistics),
loaded from the store on first use and reloaded when the corpus's ``generation`` moved (any
add or delete, by any process). A chunk reaches the pipeline as a read-only
:class:`~quipu.core.records.MemoryVersion` whose ``id`` is the chunk's storage key and whose
``metadata`` points back at the document and offsets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from quipu.core.documents import StoredChunk
from quipu.core.query import Candidate, Filters
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Provenance,
    Relation,
    ScopeRef,
    Source,
    Status,
    Trust,
)
from quipu.retrieval.bm25 import Postings, query_tokens, tokenize_many
from quipu.retrieval.expansion import query_keys
from quipu.retrieval.vectors import Vector
from quipu.storage.base import SearchInfo, Store

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Corpora kept loaded at once (least recently used dropped first).
_CACHED = 32


class ChunkIndex:
    """One corpus's served chunks: exact cosine over a matrix and BM25 over their text."""

    def __init__(self, ref: ScopeRef, rows: Sequence[StoredChunk], generation: int) -> None:
        self.ref = ref
        self.generation = generation
        self.rows = list(rows)
        self.keys = np.array([r.key for r in self.rows], dtype=np.int64)
        self.position = {r.key: i for i, r in enumerate(self.rows)}
        dimension = len(self.rows[0].vector) if self.rows else 0
        self.matrix: npt.NDArray[np.float32] = (
            np.vstack([r.vector for r in self.rows]).astype(np.float32)
            if self.rows
            else np.zeros((0, dimension), dtype=np.float32)
        )
        self.postings = Postings()
        self.postings.bulk_add(tokenize_many([r.chunk.text for r in self.rows]))

    def _top(self, scores: npt.NDArray[np.float32], limit: int) -> list[Candidate]:
        if scores.size == 0:
            return []
        take = min(limit, scores.size)
        picked = np.argpartition(-scores, take - 1)[:take]
        ordered = sorted(picked.tolist(), key=lambda i: (-float(scores[i]), int(self.keys[i])))
        return [Candidate(int(self.keys[i]), float(scores[i])) for i in ordered]

    def vector(self, query: Vector, limit: int) -> list[Candidate]:
        if not self.rows:
            return []
        return self._top(self.matrix @ np.asarray(query, dtype=np.float32), limit)

    def text(self, query: str, limit: int, expansion: float) -> list[Candidate]:
        keys = query_keys(query, expansion) if expansion > 0 else query_tokens(query)
        scores = self.postings.scores(keys)
        if scores is None:
            return []
        found = self._top(scores, limit)
        return [c for c in found if c.score > 0]

    def frequencies(self, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        counts = {k: self.postings.document_frequency(k) for k in keys}
        return len(self.rows), {k: n for k, n in counts.items() if n}

    def similarities(self, keys: Sequence[int], vector: Vector) -> dict[int, float]:
        at = [self.position[k] for k in keys if k in self.position]
        if not at:
            return {}
        scores = self.matrix[at] @ np.asarray(vector, dtype=np.float32)
        return {int(self.keys[i]): float(s) for i, s in zip(at, scores, strict=True)}


def as_memory(ref: ScopeRef, row: StoredChunk) -> MemoryVersion:
    """A served chunk as the read-only record the pipeline ranks and shapes."""
    chunk = row.chunk
    return MemoryVersion(
        id=str(row.key),
        version=1,
        tenant_id=ref.tenant_id,
        scope=ref.scope,
        owner=ref.owner,
        project=None,
        text=chunk.text,
        kind=Kind.NOTE,
        status=Status.ACTIVE,
        confidence=1.0,
        source=Source.EXPLICIT,
        trust=Trust.VERIFIED,
        tags=(),
        metadata={
            "document_id": row.document_id,
            "seq": chunk.seq,
            "start": chunk.start,
            "end": chunk.end,
        },
        aliases=(),
        provenance=Provenance(),
        observed_at=None,
        valid_at=_EPOCH,
        invalid_at=None,
        recorded_at=_EPOCH,
        content_hash="",
        embedding_model=None,
        relation=Relation.CREATED,
        actor="",
    )


class ChunkPort:
    """The pipeline's port over the document corpora of one store (thread-safe)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._indexes: OrderedDict[ScopeRef, ChunkIndex] = OrderedDict()
        self._rows: dict[int, tuple[ScopeRef, StoredChunk]] = {}

    def index(self, ref: ScopeRef) -> ChunkIndex:
        """The corpus's index, reloaded when its generation moved since it was loaded."""
        corpus = self.store.doc_corpus(ref)
        generation = corpus[1] if corpus is not None else 0
        with self._lock:
            found = self._indexes.get(ref)
            if found is not None and found.generation == generation:
                self._indexes.move_to_end(ref)
                return found
        fresh = ChunkIndex(ref, self.store.doc_served(ref), generation)
        with self._lock:
            old = self._indexes.pop(ref, None)
            for row in old.rows if old is not None else ():
                self._rows.pop(row.key, None)
            self._indexes[ref] = fresh
            self._rows.update((row.key, (ref, row)) for row in fresh.rows)
            while len(self._indexes) > _CACHED:
                _, dropped = self._indexes.popitem(last=False)
                for row in dropped.rows:
                    self._rows.pop(row.key, None)
        return fresh

    def row(self, key: int) -> StoredChunk | None:
        with self._lock:
            found = self._rows.get(key)
        return None if found is None else found[1]

    # -- SearchPort ----------------------------------------------------------------------------
    def vector_candidates(
        self, ref: ScopeRef, vector: Vector, flt: Filters, limit: int
    ) -> tuple[list[Candidate], SearchInfo]:
        index = self.index(ref)
        return index.vector(vector, limit), SearchInfo("chunks-exact", len(index.rows))

    def text_candidates(
        self, ref: ScopeRef, text: str, flt: Filters, limit: int, *, expansion: float = 0.0
    ) -> tuple[list[Candidate], SearchInfo]:
        index = self.index(ref)
        return index.text(text, limit, expansion), SearchInfo("chunks-bm25", len(index.rows))

    def key_frequencies(self, ref: ScopeRef, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.index(ref).frequencies(keys)

    def exact_candidates(self, ref: ScopeRef, folded: str, text_hash: str) -> list[tuple[int, str]]:
        return []  # chunks carry no aliases; an exact query is found by BM25

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]:
        with self._lock:
            found = {k: self._rows[k] for k in keys if k in self._rows}
        return {k: as_memory(ref, row) for k, (ref, row) in found.items()}

    def sessions_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, str]:
        return {}

    def vectors_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, Vector]:
        index = self.index(ref)
        return {k: index.matrix[index.position[k]] for k in keys if k in index.position}

    def similarities(self, ref: ScopeRef, keys: Sequence[int], vector: Vector) -> dict[int, float]:
        return self.index(ref).similarities(keys, vector)
