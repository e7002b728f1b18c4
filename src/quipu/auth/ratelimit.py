"""Per-key token buckets for writes (MEM-5): in-process, or shared through the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from quipu.core.buckets import spend
from quipu.errors import LimitExceeded
from quipu.storage.base import Store


class RateLimiter:
    """``rate`` tokens per second refill up to ``burst``; each write takes one."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> None:
        """Spend one token for ``key`` or raise 429 ``rate_limited`` with a Retry-After."""
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens, wait = spend(tokens, now - last, self.rate, self.burst)
            self._buckets[key] = (tokens, now)
            if wait > 0:
                raise LimitExceeded(
                    f"too many writes for this key; retry in {wait:.1f}s",
                    code="rate_limited",
                    details={"retry_after_s": round(wait, 3)},
                    retry_after=wait,
                )
            if len(self._buckets) > 100_000:
                self._buckets.clear()


class SharedRateLimiter:
    """The same buckets kept in the store, so every server process on it shares them."""

    def __init__(
        self,
        store: Store,
        rate: float,
        burst: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.rate = rate
        self.burst = burst
        self._clock = clock

    def take(self, key: str) -> None:
        wait = self.store.take_rate_token(key, self.rate, self.burst, self._clock())
        if wait > 0:
            raise LimitExceeded(
                f"too many writes for this key; retry in {wait:.1f}s",
                code="rate_limited",
                details={"retry_after_s": round(wait, 3)},
                retry_after=wait,
            )
