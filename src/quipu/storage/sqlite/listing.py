"""The WHERE clause of a scope's memory listing on SQLite (``SQLiteStore.list_page``): now or
``as_of``, with the listing filters."""

from __future__ import annotations

from quipu.core.lifecycle import HIDDEN
from quipu.core.query import Filters
from quipu.core.records import ScopeRef
from quipu.storage.sqlite.search import now_micros
from quipu.storage.timecodec import FOREVER, to_micros

HIDDEN_VALUES = tuple(sorted(s.value for s in HIDDEN))


def list_where(ref: ScopeRef, f: Filters) -> tuple[list[str], list[object]]:
    where = ["tenant_id = ?", "scope = ?", "owner = ?"]
    params: list[object] = [ref.tenant_id, ref.scope.value, ref.owner]
    if f.as_of is None:
        now = now_micros()
        statuses = [s.value for s in f.statuses]
        where += [
            "is_current = 1",
            f"status IN ({','.join('?' * len(statuses))})",
            "(status != 'active' OR (valid_at <= ? AND (invalid_at IS NULL OR invalid_at > ?)))",
        ]
        params += [*statuses, now, now]
    else:
        at = to_micros(f.as_of)
        where += [
            "valid_at <= ?",
            f"COALESCE(valid_to, {FOREVER}) > ?",
            f"status NOT IN ({','.join('?' * len(HIDDEN_VALUES))})",
            "id NOT IN (SELECT id FROM memory_versions h WHERE h.tenant_id = ? AND h.scope = ?"
            " AND h.owner = ? AND h.is_current = 1"
            f" AND h.status IN ({','.join('?' * len(HIDDEN_VALUES))}))",
        ]
        params += [
            at,
            at,
            *HIDDEN_VALUES,
            ref.tenant_id,
            ref.scope.value,
            ref.owner,
            *HIDDEN_VALUES,
        ]
    if f.project is None:
        where.append("project IS NULL")
    else:
        where.append("(project IS NULL OR project = ?)")
        params.append(f.project)
    if f.kinds:
        where.append(f"kind IN ({','.join('?' * len(f.kinds))})")
        params += sorted(k.value for k in f.kinds)
    if f.sources:
        where.append(f"source IN ({','.join('?' * len(f.sources))})")
        params += sorted(s.value for s in f.sources)
    if f.min_confidence is not None:
        where.append("confidence >= ?")
        params.append(f.min_confidence)
    if f.observed_after is not None:
        where.append("observed_at >= ?")
        params.append(to_micros(f.observed_after))
    if f.observed_before is not None:
        where.append("observed_at < ?")
        params.append(to_micros(f.observed_before))
    for tag in sorted(f.tags):
        where.append("EXISTS (SELECT 1 FROM json_each(tags) WHERE value = ?)")
        params.append(tag)
    return where, params
