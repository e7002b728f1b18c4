"""What a scope index keeps to answer dated questions cheaply (issue 23 finding 1): its rows
ordered by observation time, so a window is counted and read with two binary searches, and
small memos of one recall's earlier searches (filter masks, BM25 and vector scores) that its
window searches read instead of passing over the whole scope again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from quipu.core.query import Filters

#: Entries each memo of an index keeps (the last searches of a recall).
MEMO = 2
#: Rows added after the time order was built that are still checked one by one; past this
#: (plus a quarter of the ordered rows) the order is rebuilt.
UNORDERED = 256
Memo = dict[Any, tuple[Any, ...]]


class TimeOrder:
    """The rows of an index with a known observation time, ordered by it. Rows never change
    their observation time and are only appended, so the order stays true; rows added since it
    was built are checked one by one until there are enough to rebuild it."""

    def __init__(self) -> None:
        self._rows = np.zeros(0, dtype=np.intp)
        self._times = np.zeros(0, dtype=np.int64)
        self._ordered = 0  # rows 0.._ordered are in the order

    def rows(
        self,
        observed: npt.NDArray[np.int64],
        known: npt.NDArray[np.bool_],
        n: int,
        after: int | None,
        before: int | None,
    ) -> npt.NDArray[np.intp]:
        """Rows ``0..n`` observed at or after ``after`` and before ``before`` (microseconds;
        ``None``: unbounded), ascending."""
        if n - self._ordered > self._ordered // 4 + UNORDERED:
            with_time = np.flatnonzero(known[:n])
            self._rows = with_time[np.argsort(observed[with_time], kind="stable")]
            self._times = observed[self._rows]
            self._ordered = n
        low = 0 if after is None else int(np.searchsorted(self._times, after))
        high = self._times.size if before is None else int(np.searchsorted(self._times, before))
        rows = self._rows[low:high]
        if n > self._ordered:
            inside = known[self._ordered : n].copy()
            times = observed[self._ordered : n]
            if after is not None:
                inside &= times >= after
            if before is not None:
                inside &= times < before
            rows = np.concatenate([rows, self._ordered + np.flatnonzero(inside)])
        return np.sort(rows)


def unwindowed(filters: Filters) -> Filters:
    """``filters`` without their observation window."""
    if filters.observed_after is None and filters.observed_before is None:
        return filters
    return replace(filters, observed_after=None, observed_before=None)


def remember(memo: Memo, key: Any, value: tuple[Any, ...]) -> None:
    """Keep ``value`` under ``key``, dropping the oldest entries past :data:`MEMO`."""
    memo.pop(key, None)
    while len(memo) >= MEMO:
        memo.pop(next(iter(memo)))
    memo[key] = value
