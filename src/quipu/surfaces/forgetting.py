"""Forgetting is idempotent on every surface (issue 27): HTTP DELETE, POST .../forget and
the ``memory_forget`` tool answer a repeated forget with the version that forgot the memory."""

from __future__ import annotations

from collections.abc import Callable

from quipu.core.records import MemoryVersion, Status
from quipu.errors import Conflict


def forget_once(
    forget: Callable[[], MemoryVersion], versions: Callable[[], list[MemoryVersion]]
) -> MemoryVersion:
    """Forgetting is idempotent (issue 27): forgetting a forgotten memory again answers 200
    with the version that forgot it, instead of 409 ``illegal_transition`` (or
    ``version_conflict`` for a retry that names the version it read). A memory the caller
    cannot see stays 404, and any other conflict stays a conflict."""
    try:
        return forget()
    except Conflict:
        found = versions()
        if found and found[-1].status is Status.UNAVAILABLE:
            return found[-1]
        raise
