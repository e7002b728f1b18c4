"""A value built on first use, exactly once, under a lock; read without the lock after that.
The local embedder and the reranker load their models this way."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

_T = TypeVar("_T")


class Once(Generic[_T]):
    def __init__(self, build: Callable[[], _T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: _T | None = None

    def get(self) -> _T:
        """The value, built by the first caller (others wait for it). A build that raises
        leaves nothing behind: the next call tries again."""
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
                value = self._value
        return value
