"""Comparison baselines for the benchmarks: BM25 (bm25s), exact dense kNN (numpy), and the
plain hybrid of the two by reciprocal-rank fusion.

Both index a list of ``(turn_id, text)`` pairs and answer ``rank(query, n)`` with the ids of
the best ``n`` turns, best first. Ties keep index order, so rankings are deterministic.

``BM25Baseline`` uses bm25s with its defaults (Lucene BM25, k1 = 1.5, b = 0.75) and its
default tokenizer (lower-case, ``\\b\\w\\w+\\b`` tokens) with English stop words and no
stemmer. Turns are ranked on their full score vector, so every turn can be returned, zero
scores included (a query whose words are all stop words or unseen ranks in index order).

``DenseBaseline`` takes any object with ``embed_batch(texts) -> ndarray`` and ranks by exact
cosine similarity (rows are re-normalised, so an embedder's rounding cannot skew scores).

``HybridBaseline`` is what a plain hybrid search engine does: the BM25 and dense rankings of
the two baselines above (each cut at ``depth``; BM25 keeps only turns that share a word with
the query), fused by reciprocal-rank fusion with Quipu's own :func:`~quipu.retrieval.fusion.rrf`
at k = 60 and equal weights (issue 31's "plain hybrid").

bm25s is a development dependency, imported when a ``BM25Baseline`` is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from quipu.core.query import Candidate
from quipu.retrieval.fusion import RRF_K, rrf

__all__ = ["BM25Baseline", "BatchEmbedder", "DenseBaseline", "HybridBaseline"]


class BatchEmbedder(Protocol):
    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def _split(items: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    ids = [turn_id for turn_id, _ in items]
    if len(set(ids)) != len(ids):
        raise ValueError("turn ids must be unique")
    return ids, [text for _, text in items]


def _best(scores: npt.NDArray[np.floating[Any]], ids: Sequence[str], n: int) -> list[str]:
    if n < 0:
        raise ValueError(f"n must not be negative, got {n}")
    order = np.argsort(-scores, kind="stable")[:n]
    return [ids[int(index)] for index in order]


class BM25Baseline:
    """Lexical baseline: bm25s over the turns' texts."""

    def __init__(self, items: Sequence[tuple[str, str]]) -> None:
        import bm25s

        self._bm25s = bm25s
        self._ids, texts = _split(items)
        self._retriever: Any = None
        if self._ids:
            tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
            self._retriever = bm25s.BM25()
            self._retriever.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return len(self._ids)

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """The BM25 score of every indexed turn, in index order."""
        if self._retriever is None:
            return np.zeros(0, dtype=np.float32)
        tokens = self._bm25s.tokenize(
            [query], stopwords="en", return_ids=False, show_progress=False
        )
        words: list[str] = tokens[0] if tokens else []
        if not words:
            return np.zeros(len(self._ids), dtype=np.float32)
        return np.asarray(self._retriever.get_scores(words), dtype=np.float32)

    def rank(self, query: str, n: int) -> list[str]:
        """The ids of the ``n`` best turns for ``query``, best first."""
        return _best(self.scores(query), self._ids, n)


class DenseBaseline:
    """Semantic baseline: exact cosine kNN over the turns' embeddings."""

    def __init__(
        self,
        items: Sequence[tuple[str, str]],
        embedder: BatchEmbedder,
        *,
        batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._embedder = embedder
        self._ids, texts = _split(items)
        blocks = [
            self._embed(texts[start : start + batch_size])
            for start in range(0, len(texts), batch_size)
        ]
        self._matrix: npt.NDArray[np.float32] = (
            np.concatenate(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)
        )

    def __len__(self) -> int:
        return len(self._ids)

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = np.asarray(self._embedder.embed_batch(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"embed_batch returned shape {vectors.shape} for {len(texts)} texts")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = np.divide(
            vectors, norms, out=np.zeros_like(vectors), where=norms > 0
        )
        return normalised

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """The cosine similarity of every indexed turn to ``query``, in index order."""
        if not self._ids:
            return np.zeros(0, dtype=np.float32)
        vector = self._embed([query])[0]
        if vector.shape[0] != self._matrix.shape[1]:
            raise ValueError(
                f"query vector has dimension {vector.shape[0]}, index has {self._matrix.shape[1]}"
            )
        similarities: npt.NDArray[np.float32] = self._matrix @ vector
        return similarities

    def rank(self, query: str, n: int) -> list[str]:
        """The ids of the ``n`` turns most similar to ``query``, best first."""
        return _best(self.scores(query), self._ids, n)


class HybridBaseline:
    """Plain hybrid: reciprocal-rank fusion of a BM25 and a dense baseline over the same turns
    (k = 60, equal weights), each list cut at ``depth`` (or ``n``, when deeper)."""

    def __init__(
        self,
        items: Sequence[tuple[str, str]],
        embedder: BatchEmbedder,
        *,
        depth: int = 100,
        k: int = RRF_K,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._ids, _ = _split(items)
        self._bm25 = BM25Baseline(items)
        self._dense = DenseBaseline(items, embedder)
        self._depth = depth
        self._k = k

    def __len__(self) -> int:
        return len(self._ids)

    def rank(self, query: str, n: int) -> list[str]:
        """The ids of the ``n`` best turns for ``query`` by fused rank, best first."""
        if n < 0:
            raise ValueError(f"n must not be negative, got {n}")
        if not self._ids:
            return []
        depth = max(self._depth, n)
        lexical = self._bm25.scores(query)
        semantic = self._dense.scores(query)
        lists = {
            "text": [
                Candidate(int(i), float(lexical[i]))
                for i in np.argsort(-lexical, kind="stable")[:depth]
                if lexical[i] > 0
            ],
            "semantic": [
                Candidate(int(i), float(semantic[i]))
                for i in np.argsort(-semantic, kind="stable")[:depth]
            ],
        }
        fused = rrf(lists, None, self._k)
        return [self._ids[key] for key, _, _ in fused[:n]]
