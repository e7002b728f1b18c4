"""Row filters (:class:`quipu.core.query.Filters`) as SQL over ``memory_versions m``.

The same predicate as the SQLite scope index's mask and list query: current versions in the
asked statuses (active ones only while valid now), or with ``as_of`` the versions valid at that
instant whose family is not now hidden (:data:`quipu.core.lifecycle.HIDDEN`; MEM-2, LIFE-3).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from quipu.core import lifecycle
from quipu.core.query import Filters
from quipu.core.records import ScopeRef

#: Statuses that hide a family from ``as_of`` reads, whatever version was valid then.
HIDDEN = sorted(s.value for s in lifecycle.HIDDEN)


def scope_where(ref: ScopeRef, params: dict[str, Any]) -> str:
    params.update(t=ref.tenant_id, s=ref.scope.value, o=ref.owner)
    return "m.tenant_id = %(t)s AND m.scope = %(s)s AND m.owner = %(o)s"


def filter_where(f: Filters, params: dict[str, Any], now: datetime | None = None) -> str:
    """SQL conditions on ``m`` for ``f``; named parameters go into ``params`` (``f_*``)."""
    where: list[str] = []
    if f.as_of is None:
        params["f_statuses"] = sorted(s.value for s in f.statuses)
        params["f_now"] = now or datetime.now(UTC)
        where += [
            "m.is_current",
            "m.status = ANY(%(f_statuses)s)",
            "(m.status <> 'active' OR (m.valid_at <= %(f_now)s"
            " AND (m.valid_to IS NULL OR m.valid_to > %(f_now)s)))",
        ]
    else:
        params["f_at"] = f.as_of
        params["f_hidden"] = HIDDEN
        where += [
            "m.valid_at <= %(f_at)s",
            "(m.valid_to IS NULL OR m.valid_to > %(f_at)s)",
            "m.status <> ALL(%(f_hidden)s)",
            "NOT EXISTS (SELECT 1 FROM memory_versions h WHERE h.tenant_id = m.tenant_id"
            " AND h.id = m.id AND h.is_current AND h.status = ANY(%(f_hidden)s))",
        ]
    if f.project is None:
        where.append("m.project IS NULL")
    else:
        params["f_project"] = f.project
        where.append("(m.project IS NULL OR m.project = %(f_project)s)")
    if f.kinds:
        params["f_kinds"] = sorted(k.value for k in f.kinds)
        where.append("m.kind = ANY(%(f_kinds)s)")
    if f.sources:
        params["f_sources"] = sorted(s.value for s in f.sources)
        where.append("m.source = ANY(%(f_sources)s)")
    if f.min_confidence is not None:
        params["f_confidence"] = f.min_confidence
        where.append("m.confidence >= %(f_confidence)s")
    if f.observed_after is not None:
        params["f_after"] = f.observed_after
        where.append("m.observed_at >= %(f_after)s")
    if f.observed_before is not None:
        params["f_before"] = f.observed_before
        where.append("m.observed_at < %(f_before)s")
    if f.tags:
        params["f_tags"] = sorted(f.tags)
        where.append("m.tags @> %(f_tags)s::text[]")
    return " AND ".join(where)
