"""Vectors of texts a model has already embedded, kept in a file across benchmark runs.

A lever study runs the same benchmark many times with one setting changed; most of each
run's time is the model embedding the same turns again. One model gives one text the same
vector every time, so a run that reads them from this cache ranks exactly as one that
computes them (``quipu bench … --vector-cache FILE``; docs/benchmarks.md checks it).

A :mod:`dbm.dumb` file (``FILE.dat`` and ``FILE.dir``; plain Python, no database driver)
keyed by the model id and the SHA-256 of the text. Only single texts are cached: a batch is
embedded as it comes, since padding can move a vector in the last digits.
"""

from __future__ import annotations

import dbm.dumb
import hashlib
import threading
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
        self._db = dbm.dumb.open(str(path), "c")  # noqa: SIM115 -- kept open until close()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> bytes:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{self.model_id}\0{digest}".encode()

    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if len(texts) != 1 or isinstance(texts, str):
            return self.inner.embed_batch(texts)
        key = self._key(texts[0])
        with self._lock:
            stored = self._db.get(key)
        if stored is not None and len(stored) == 4 * self.dimension:
            self.hits += 1
            return np.frombuffer(stored, dtype=np.float32).reshape(1, self.dimension).copy()
        self.misses += 1
        vectors = self.inner.embed_batch(texts)
        with self._lock:
            self._db[key] = np.asarray(vectors[0], dtype=np.float32).tobytes()
        return vectors

    def close(self) -> None:
        """Write what was added and close the file."""
        with self._lock:
            self._db.close()
