"""The one seam every embedding backend implements.

An :class:`Embedder` turns texts into unit-length float32 vectors. Backends implement a
single method, :meth:`Embedder.embed_batch`; everything else is built on it. A backend that
cannot produce real vectors raises :class:`~quipu.errors.EmbeddingUnavailable`: it never
returns zeros or partial results in their place.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quipu.errors import EmbeddingUnavailable

Vectors = npt.NDArray[np.float32]
"""A float32 matrix of shape ``(count, dimension)``, one unit-length row per text."""


class Embedder(abc.ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``model_id`` names the exact model build: vectors from two embedders are comparable
    only when their ``model_id`` values are equal.
    """

    model_id: str
    dimension: int

    @abc.abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``, returning shape ``(len(texts), dimension)``, rows in input order.

        Every row has L2 norm 1. Raises ``EmbeddingUnavailable`` when the vectors cannot be
        computed.
        """

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed a single text, returning a vector of shape ``(dimension,)``."""
        vectors: npt.NDArray[np.float32] = self.embed_batch([text])[0]
        return vectors

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Embed a recall query: the same vector as :meth:`embed_one`; a backend may run it
        differently (the local model: without spin-waiting threads, see LocalEmbedder)."""
        return self.embed_one(text)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Embed the texts of one recall (the query and its focused form) as
        :meth:`embed_query` does, in one call: a remote backend sends one request."""
        return self.embed_batch(texts)


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, refusing a bare string (which would embed one character per row)."""
    if isinstance(texts, str):
        raise TypeError("embed_batch takes a sequence of strings, not a single string")
    checked = list(texts)
    for index, text in enumerate(checked):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] is {type(text).__name__}, not str")
    return checked


def normalise_rows(vectors: npt.NDArray[np.floating], *, count: int, dimension: int) -> Vectors:
    """Check a raw ``(count, dimension)`` matrix and scale every row to unit length.

    Raises ``EmbeddingUnavailable`` for a wrong shape, a non-finite value or an all-zero row:
    such a matrix is a broken backend, not a vector to store.
    """
    if vectors.shape != (count, dimension):
        raise EmbeddingUnavailable(
            f"embedder produced shape {vectors.shape}, expected {(count, dimension)}",
            details={"shape": list(vectors.shape), "expected": [count, dimension]},
        )
    matrix = vectors.astype(np.float64, copy=False)
    if not np.isfinite(matrix).all():
        raise EmbeddingUnavailable("embedder produced a non-finite value (NaN or infinity)")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    zero_rows = np.flatnonzero(norms[:, 0] == 0.0)
    if zero_rows.size:
        raise EmbeddingUnavailable(
            f"embedder produced an all-zero vector for text #{int(zero_rows[0])}",
            details={"rows": zero_rows[:10].tolist()},
        )
    normalised: Vectors = (matrix / norms).astype(np.float32)
    return normalised
