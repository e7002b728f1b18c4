"""Rows of one end user's partitions, as a subject erasure reads them from any plane (LIFE-4):
the SQL of each backend narrows to the ``user`` and ``agent_user`` scopes of the user; this
keeps only the rows :func:`~quipu.core.governance.subject_of` agrees are that user's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from quipu.core.governance import subject_of
from quipu.core.records import Scope, ScopeRef


def subject_rows(tenant_id: str, user_id: str, rows: Iterable[Any]) -> list[tuple[ScopeRef, str]]:
    """``(scope, owner, id)`` rows as ``(partition, id)``, the user's only."""
    out: list[tuple[ScopeRef, str]] = []
    for scope, owner, ident in rows:
        ref = ScopeRef(tenant_id, Scope(str(scope)), str(owner))
        if subject_of(ref) == user_id:
            out.append((ref, str(ident)))
    return out
