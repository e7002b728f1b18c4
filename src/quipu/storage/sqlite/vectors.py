"""The vectors of one scope index: a read-only base followed by rows this process added.

The base is what the scope held when the index was loaded: a view of the index file mapped by
every process that opened the scope (shared through the page cache, issue 23), or of the bytes
read from the database. Rows written later go to a small array of this process's own, so a
write never copies the base; only changing a base row (a re-embedded memory) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


class Vectors:
    """Rows ``0..len(base)`` read from ``base``, the rest from a growing array in memory."""

    def __init__(self, dimension: int, base: npt.NDArray[np.float32] | None = None) -> None:
        self.dimension = dimension
        self._base: npt.NDArray[np.float32] = (
            np.zeros((0, dimension), dtype=np.float32) if base is None else base
        )
        self._tail: npt.NDArray[np.float32] = np.zeros((0, dimension), dtype=np.float32)

    @property
    def base_rows(self) -> int:
        return int(self._base.shape[0])

    @property
    def shared(self) -> bool:
        """Whether the base is still the read-only bytes it was loaded from."""
        return not self._base.flags.writeable and self.base_rows > 0

    def set(self, i: int, vector: npt.ArrayLike) -> None:
        m = self.base_rows
        if i < m:
            if not self._base.flags.writeable:
                self._base = self._base.copy()  # this process's own copy from now on
            self._base[i] = vector
            return
        self.reserve(i + 1)
        self._tail[i - m] = vector

    def reserve(self, n: int) -> None:
        """Room for rows ``0..n`` (a row given no vector reads as zeros)."""
        at = n - self.base_rows
        if at > self._tail.shape[0]:
            grown = np.zeros((max(64, 2 * at), self.dimension), dtype=np.float32)
            grown[: self._tail.shape[0]] = self._tail
            self._tail = grown

    def row(self, i: int) -> npt.NDArray[np.float32]:
        m = self.base_rows
        found: npt.NDArray[np.float32] = self._base[i] if i < m else self._tail[i - m]
        return found

    def take(self, idx: npt.NDArray[np.intp] | Sequence[int]) -> npt.NDArray[np.float32]:
        """Rows ``idx`` (in that order) as one new array."""
        positions = np.asarray(idx, dtype=np.intp)
        m = self.base_rows
        if positions.size == 0 or positions.max() < m:
            out: npt.NDArray[np.float32] = self._base[positions]
            return out
        if positions.min() >= m:
            tail: npt.NDArray[np.float32] = self._tail[positions - m]
            return tail
        gathered = np.empty((positions.size, self.dimension), dtype=np.float32)
        low = positions < m
        gathered[low] = self._base[positions[low]]
        gathered[~low] = self._tail[positions[~low] - m]
        return gathered

    def scores(self, query: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.float32]:
        """``row @ query`` for rows ``0..n``."""
        m = self.base_rows
        head: npt.NDArray[np.float32] = self._base[: min(n, m)] @ query
        if n <= m:
            return head
        rest: npt.NDArray[np.float32] = self._tail[: n - m] @ query
        return np.concatenate([head, rest])

    def parts(self, n: int) -> list[npt.NDArray[Any]]:
        """Rows ``0..n`` as contiguous pieces, in order (written to an index file as they are)."""
        m = self.base_rows
        pieces = [np.ascontiguousarray(self._base[: min(n, m)])]
        if n > m:
            pieces.append(np.ascontiguousarray(self._tail[: n - m]))
        return pieces
