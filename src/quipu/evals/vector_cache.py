"""Vectors of texts a model has already embedded, kept in a file across benchmark runs.

A lever study runs the same benchmark many times with one setting changed; most of each
run's time is the model embedding the same turns again. One model gives one text the same
vector every time, so a run that reads them from this cache ranks exactly as one that
computes them (``quipu bench … --vector-cache FILE``; docs/benchmarks.md checks it).

A SQLite file keyed by the model id and the SHA-256 of the text. Only single texts are cached:
a batch is embedded as it comes, since padding can move a vector in the last digits.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quipu.embeddings.base import Embedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder(Embedder):
    """``inner`` with single-text calls served from, and added to, the cache file ``path``."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, digest TEXT NOT NULL,"
            " vector BLOB NOT NULL, PRIMARY KEY (model, digest))"
        )
        self.hits = 0
        self.misses = 0

    def _digest(self, text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if len(texts) != 1 or isinstance(texts, str):
            return self.inner.embed_batch(texts)
        digest = self._digest(texts[0])
        row = self._db.execute(
            "SELECT vector FROM vectors WHERE model = ? AND digest = ?", (self.model_id, digest)
        ).fetchone()
        if row is not None:
            self.hits += 1
            return np.frombuffer(row[0], dtype=np.float32).reshape(1, self.dimension).copy()
        self.misses += 1
        vectors = self.inner.embed_batch(texts)
        self._db.execute(
            "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
            (self.model_id, digest, np.asarray(vectors[0], dtype=np.float32).tobytes()),
        )
        return vectors

    def close(self) -> None:
        """Write what was added and close the file."""
        self._db.commit()
        self._db.close()
