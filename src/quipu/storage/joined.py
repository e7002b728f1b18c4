"""One transaction around several store writes (GRAPH-2: a memory row and its graph mirror
commit together or not at all).

A store's ``transaction()`` opens its write transaction and *joins* this thread to it: every
store method the thread calls inside the block (``insert``, ``graph_write``, ``record_audit``)
runs on that same connection instead of opening its own, so they commit together, and an
exception (or the process dying) anywhere in the block leaves none of them. Only the thread
that opened the block joins; other threads wait for the write lock (SQLite) or use their own
connections (PostgreSQL) as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_LOCAL = threading.local()


def joined_to(store: object) -> Any | None:
    """The connection of ``store``'s open ``transaction()`` on this thread, or None."""
    pair: tuple[object, Any] | None = getattr(_LOCAL, "pair", None)
    if pair is not None and pair[0] is store:
        return pair[1]
    return None


@contextmanager
def join(store: object, conn: Any) -> Iterator[None]:
    """Route ``store``'s connections on this thread to ``conn`` for the block."""
    if getattr(_LOCAL, "pair", None) is not None:
        raise RuntimeError("a store transaction is already open on this thread")
    _LOCAL.pair = (store, conn)
    try:
        yield
    finally:
        _LOCAL.pair = None
