"""Query vectors remembered for a moment: one merged recall reads several scopes and the
knowledge plane with one query, and each read would embed it again (RECALL-9)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quipu.embeddings.base import Embedder, Vectors

#: Distinct query texts (or text groups) kept.
_KEPT = 512


class QueryMemo(Embedder):
    """``inner`` with its query embeddings (:meth:`embed_query`, :meth:`embed_queries`)
    remembered by text, least recently used first out. Document embeddings pass through.
    Thread-safe; an unavailable embedder raises as before and nothing is remembered."""

    def __init__(self, inner: Embedder, kept: int = _KEPT) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._kept = kept
        self._lock = threading.Lock()
        self._found: OrderedDict[tuple[str, ...], Vectors] = OrderedDict()
        self._running: dict[tuple[str, ...], threading.Event] = {}

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_batch(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self.embed_queries([text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """The remembered vectors of ``texts``, else embedded once: a caller asking for
        texts another thread is embedding waits for that answer instead of embedding them
        again (a merged recall's reads start together, issue 25)."""
        key = tuple(texts)
        while True:
            with self._lock:
                found = self._found.get(key)
                if found is not None:
                    self._found.move_to_end(key)
                    return found
                running = self._running.get(key)
                if running is None:
                    running = self._running[key] = threading.Event()
                    break
            running.wait()  # the embedding thread finished (or failed: then try ourselves)
        try:
            made = (
                self.inner.embed_query(texts[0])[None, :]
                if len(texts) == 1
                else self.inner.embed_queries(texts)
            )
            made.setflags(write=False)
            with self._lock:
                self._found[key] = made
                while len(self._found) > self._kept:
                    self._found.popitem(last=False)
            return made
        finally:
            with self._lock:
                self._running.pop(key, None)
            running.set()
