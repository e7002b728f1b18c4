"""Re-indexing the documents plane (DOC-1): ``quipu reindex --corpus``.

Each scope's corpus pins the embedding model and dimension of its chunk vectors, and a search
or add with another model is refused (409 ``corpus_model_mismatch``) rather than silently
wrong. After a model change this re-embeds every served chunk of each corpus pinned to another
model with the store's current embedder, and re-pins the corpus, in one transaction per corpus
(a search never sees two models' vectors in one corpus). A corpus already on the current model
only gets the vectors it lacks (chunks imported from another model's export); ``every``
re-embeds those too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quipu.core.records import ScopeRef
from quipu.documents import DocumentService
from quipu.storage.base import EmbeddingPin

#: Called with the corpus being re-indexed, its chunks to embed, and how many are done.
CorpusProgress = Callable[[ScopeRef, int, int], None]


def reindex_corpora(
    documents: DocumentService,
    *,
    tenant_id: str | None = None,
    every: bool = False,
    progress: CorpusProgress | None = None,
) -> dict[str, Any]:
    """Re-embed the corpora that need it; ``{corpora, repinned, chunks, model, dimension}``:
    the corpora seen, those moved to the current model, and the chunks embedded."""
    embedder = documents._embedder()
    current = EmbeddingPin(embedder.model_id, embedder.dimension)
    store = documents.store
    seen = repinned = embedded = 0
    for ref, pin in store.doc_corpora(tenant_id):
        seen += 1
        moved = pin != current
        chunks = [
            s
            for s in store.doc_servable(ref)
            if every or moved or s.vector is None or len(s.vector) != current.dimension
        ]
        if not chunks and not moved:
            continue
        total = len(chunks)

        def done(n: int, ref: ScopeRef = ref, total: int = total) -> None:
            if progress is not None:
                progress(ref, total, n)

        done(0)
        vectors = documents.embed([s.chunk for s in chunks], done)
        store.doc_reindex(ref, current, [(s.key, v) for s, v in zip(chunks, vectors, strict=True)])
        repinned += int(moved)
        embedded += total
    return {
        "corpora": seen,
        "repinned": repinned,
        "chunks": embedded,
        "model": current.model_id,
        "dimension": current.dimension,
    }
