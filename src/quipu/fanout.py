"""Recall across several scopes in one call (SCOPE-4, issue 27), for agents.

A read still touches exactly one scope: this runs one recall per named scope, each through the
whole pipeline with the caller's own scope resolution, and merges the pages best score first.
Every hit keeps its memory's scope, so each row says where it came from; ``meta.scopes`` holds
each scope's own recall meta. Scores come from separate searches, so they rank the merged page
but are not calibrated across scopes. ``recall_context`` (when it lands) supersedes this.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from quipu.core.query import RecallResult
from quipu.core.records import Principal, Scope
from quipu.errors import InvalidInput
from quipu.memories import MemoryService

#: Scopes one fan-out may name: every scope an agent can read.
MAX_SCOPES = len(Scope)

_SAFETY_ORDER = ("exists", "probable", "unknown")


def check_scopes(scopes: object) -> list[str]:
    """A non-empty list of distinct scope names (422 ``invalid_scopes`` otherwise); each name
    is checked by the recall itself (``invalid_scope``)."""
    if (
        not isinstance(scopes, list | tuple)
        or not 1 <= len(scopes) <= MAX_SCOPES
        or not all(isinstance(s, str) for s in scopes)
        or len(set(scopes)) != len(scopes)
    ):
        raise InvalidInput(
            f"scopes is a list of 1 to {MAX_SCOPES} distinct scope names",
            code="invalid_scopes",
            details={"field": "scopes"},
        )
    return list(scopes)


def recall_across(
    service: MemoryService,
    principal: Principal,
    query: object,
    scopes: object,
    *,
    k: int | None = None,
    **filters: Any,
) -> RecallResult:
    """One recall per scope in ``scopes``, merged best first and cut to ``k`` (default_k).

    Any scope's refusal (a scope the principal has no subject for, a bad filter) refuses the
    whole call: a page silently missing a scope would read as "nothing there"."""
    names = check_scopes(scopes)
    pages = {name: service.recall(principal, query, scope=name, k=k, **filters) for name in names}
    size = service.limits.default_k if k is None else k
    merged = sorted(
        (hit for page in pages.values() for hit in page.results),
        key=lambda hit: (-hit.score, hit.rank),
    )[:size]
    hits = [replace(hit, rank=rank) for rank, hit in enumerate(merged, start=1)]
    metas = {name: page.meta for name, page in pages.items()}
    safety = min(
        (str(m.get("create_safety", "unknown")) for m in metas.values()),
        key=_SAFETY_ORDER.index,
    )
    fallback = any(bool(m.get("fallback")) for m in metas.values())
    reasons = sorted({str(m["reason"]) for m in metas.values() if m.get("reason")})
    meta: dict[str, Any] = {
        "total": len(hits),
        "limit": size,
        "fallback": fallback,
        "reason": "; ".join(reasons) or None,
        "underfilled": len(hits) < size,
        "create_safety": safety,
        "scopes": metas,
    }
    return RecallResult(hits, meta)
