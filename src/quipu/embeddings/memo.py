"""Query vectors remembered for a moment: one merged recall reads several scopes and the
knowledge plane with one query, and each read would embed it again (RECALL-9).

Vectors are remembered per text, not per group of texts: a scope read asks for the query and
its focused form together (:mod:`quipu.retrieval.focus`), the knowledge search for the query
alone, and each text is embedded once however the reads group them (issue 25). The bundled
model embeds one text per run (:class:`~quipu.embeddings.local.LocalEmbedder`), so a vector
does not depend on the texts asked for beside it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quipu.embeddings.base import Embedder, Vectors, check_texts

#: Distinct query texts kept.
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
        self._found: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._running: dict[str, threading.Event] = {}

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_batch(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self.embed_queries([text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """The vectors of ``texts``: each remembered one as it is, the rest embedded once. A
        text another thread is embedding is waited for instead of embedded again (a merged
        recall's reads start together); if that thread failed, this one tries itself."""
        items = check_texts(texts)
        have: dict[str, npt.NDArray[np.float32]] = {}
        while True:
            with self._lock:
                for text in items:
                    found = self._found.get(text)
                    if found is not None and text not in have:
                        self._found.move_to_end(text)
                        have[text] = found
                wanted = [t for t in dict.fromkeys(items) if t not in have]
                waiting = [self._running[t] for t in wanted if t in self._running]
                mine = [t for t in wanted if t not in self._running]
                for text in mine:
                    self._running[text] = threading.Event()
            if mine:
                have.update(self._embed(mine))
            for event in waiting:
                event.wait()
            if not waiting:
                break
        stacked = np.stack([have[t] for t in items]) if items else self.inner.embed_queries([])
        stacked.setflags(write=False)
        return stacked

    def _embed(self, texts: list[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Embed ``texts`` (marked running by this thread), remember and release them."""
        try:
            made = (
                self.inner.embed_query(texts[0])[None, :]
                if len(texts) == 1
                else self.inner.embed_queries(texts)
            )
            rows = {text: np.array(made[at], dtype=np.float32) for at, text in enumerate(texts)}
            for row in rows.values():
                row.setflags(write=False)
            with self._lock:
                for text, row in rows.items():
                    self._found[text] = row
                    self._found.move_to_end(text)
                while len(self._found) > self._kept:
                    self._found.popitem(last=False)
            return rows
        finally:
            with self._lock:
                events = [self._running.pop(text) for text in texts]
            for event in events:
                event.set()
