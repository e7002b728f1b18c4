"""The query memo of a merged recall (issue 25, RECALL-9): its scope reads run at once, and a
query several of them ask for together is embedded once, not once per read; a failure is
everyone's and is not remembered. The bundled model, wrapped to count what it embeds."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quipu.embeddings.base import Embedder, Vectors
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.memo import QueryMemo
from quipu.errors import EmbeddingUnavailable


class Counted(Embedder):
    """``inner``, counting the query texts it embeds; down while ``down`` is set."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id, self.dimension = inner.model_id, inner.dimension
        self.embedded: list[str] = []
        self.down = False

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_batch(texts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        self.embedded += texts
        if self.down:
            raise EmbeddingUnavailable("the model is down")
        return self.inner.embed_queries(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vector: npt.NDArray[np.float32] = self.embed_queries([text])[0]
        return vector


def _together(memo: QueryMemo, texts: list[str], callers: int) -> list[object]:
    start = threading.Barrier(callers)
    answers: list[object] = [None] * callers

    def ask(at: int) -> None:
        start.wait()
        try:
            answers[at] = memo.embed_queries(texts)
        except EmbeddingUnavailable as exc:
            answers[at] = exc

    threads = [threading.Thread(target=ask, args=(at,)) for at in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def test_recall_009_reads_asking_together_embed_the_query_once(
    local_embedder: LocalEmbedder,
) -> None:
    counted = Counted(local_embedder)
    memo = QueryMemo(counted)
    texts = ["when does Caroline go to the support group?", "support group"]
    answers = _together(memo, texts, 4)
    assert counted.embedded == texts  # one embedding of the pair, for all four readers
    first = answers[0]
    assert isinstance(first, np.ndarray) and first.shape == (2, local_embedder.dimension)
    assert all(np.array_equal(answer, first) for answer in answers)  # type: ignore[arg-type]


def test_recall_009_a_failed_embedding_is_everyones_and_not_remembered(
    local_embedder: LocalEmbedder,
) -> None:
    counted = Counted(local_embedder)
    counted.down = True
    memo = QueryMemo(counted)
    answers = _together(memo, ["the model is down"], 3)
    assert all(isinstance(a, EmbeddingUnavailable) for a in answers)
    assert counted.embedded.count("the model is down") == 3  # each caller tried once
    counted.down = False
    vector = memo.embed_query("the model is down")  # nothing was remembered: embedded now
    assert vector.shape == (local_embedder.dimension,)
    assert counted.embedded.count("the model is down") == 4
    memo.embed_query("the model is down")
    assert counted.embedded.count("the model is down") == 4  # and now remembered


def test_recall_009_a_text_is_embedded_once_whatever_it_is_asked_with(
    local_embedder: LocalEmbedder,
) -> None:
    """Issue 25 (recall_context latency): the knowledge search asks for the query alone, each
    scope read for the query and that scope's focused form; the query is embedded once and
    each focused form once, and a vector is the same as the model's alone."""
    counted = Counted(local_embedder)
    memo = QueryMemo(counted)
    query = "when does Caroline go to the support group?"
    alone = memo.embed_queries([query])
    pair = memo.embed_queries([query, "support group"])
    other = memo.embed_queries([query, "Caroline support"])
    assert counted.embedded == [query, "support group", "Caroline support"]
    assert np.array_equal(alone[0], pair[0]) and np.array_equal(pair[0], other[0])
    assert np.allclose(pair[1], local_embedder.embed_query("support group"))
    assert not pair.flags.writeable
