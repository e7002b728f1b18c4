"""A query vector moved toward another, as recall does twice: the focused query
(:mod:`quipu.retrieval.focus`) and the feedback pass (pseudo-relevance feedback). Pure."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
"""One unit-length embedding."""


def toward(vector: Vector, target: npt.NDArray[np.floating], weight: float) -> Vector | None:
    """``vector + weight * target`` scaled to unit length; ``None`` when that sum is zero."""
    moved = vector.astype(np.float64) + weight * target.astype(np.float64)
    norm = float(np.linalg.norm(moved))
    if norm == 0.0:
        return None
    out: Vector = (moved / norm).astype(np.float32)
    return out
