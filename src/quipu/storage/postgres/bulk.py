"""Verbatim import (COPY into a staging table, then one INSERT … SELECT) and streaming export.

Import keeps ids, versions, times, statuses, provenance and vectors; versions already present
(same tenant, id and version) are skipped. Each version's ``valid_to`` is computed from its
successor in the same batch, as the SQLite backend does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
import psycopg

from quipu.core.lifecycle import LIVE
from quipu.core.records import MemoryVersion, Scope, ScopeRef
from quipu.core.text import embedding_key as text_embedding_key
from quipu.core.text import fold
from quipu.core.versions import import_order, valid_to
from quipu.retrieval.bm25 import (
    TOKENIZER_VERSION,
    SessionContext,
    document_tokens,
    indexed_keys,
)
from quipu.storage.base import Vector
from quipu.storage.decode import decode_row
from quipu.storage.postgres.rows import (
    COLUMNS,
    KEY_SPAN,
    TERM_COUNT_AT,
    TERMS_AT,
    WRITE_COLUMNS,
    lexemes_of,
    to_record,
    to_values,
    tsvector_literal,
)
from quipu.storage.postgres.search import SearchPlan, track_terms


class PostgresStore(Protocol):
    """What bulk import and export use of :class:`quipu.storage.postgres.store.PostgresStore`
    (named here, not imported: the store calls this module)."""

    plan: SearchPlan

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def _tenant_number(self, tenant_id: str) -> int: ...


#: Types of the staging table's columns, in :data:`WRITE_COLUMNS` order. ``terms``, ``metadata``
#: and ``provenance`` travel as text (binary COPY) and are cast on the final insert.
_STAGE_TYPES = {
    "version": "integer",
    "is_current": "boolean",
    "confidence": "float8",
    "tags": "text[]",
    "aliases": "text[]",
    "observed_at": "timestamptz",
    "valid_at": "timestamptz",
    "invalid_at": "timestamptz",
    "valid_to": "timestamptz",
    "recorded_at": "timestamptz",
    "vector": "vector",
    "term_count": "integer",
}
_CASTS = {"metadata": "::json", "provenance": "::json", "terms": "::tsvector"}
_EXISTING_CHUNK = 5000


def import_versions(
    store: PostgresStore, items: Iterable[tuple[MemoryVersion, Vector | None]]
) -> int:
    planned = import_order(items)
    if not planned:
        return 0
    families = {(m.tenant_id, m.id) for m, _, _ in planned}
    present = _present(store, families)
    rows: list[tuple[Any, ...]] = []
    aliases: list[tuple[str, str, str, str, int]] = []
    state: dict[tuple[str, str, str], list[int]] = {}
    dfs: dict[tuple[str, str, str, str], int] = {}
    numbers = {tenant: store._tenant_number(tenant) for tenant, _ in families}
    fresh = [p for p in planned if (p[0].tenant_id, p[0].id, p[0].version) not in present]
    chain = _seeded_context(store, [m for m, _, _ in fresh])
    for memory, vector, successor in fresh:
        tenant = memory.tenant_id
        end = valid_to(memory, successor) if successor else memory.invalid_at
        key_text = None
        f32 = None
        if vector is not None and memory.embedding_model:
            key_text = text_embedding_key(memory.text)
            f32 = np.ascontiguousarray(vector, dtype=np.float32)
        own = document_tokens(memory.text, memory.aliases, memory.observed_at)
        context = chain.next(_session_of(memory), memory.id, own)
        values = to_values(memory, key_text, f32, end, context)
        rows.append((len(rows), numbers[tenant], *values))
        scope = (tenant, memory.scope.value, memory.owner)
        counts = state.setdefault(scope, [0, 0, 0, 0])
        counts[0] += int(memory.is_current and memory.status in LIVE)
        counts[1] += int(memory.is_current)
        counts[2] += 1
        counts[3] += int(values[TERM_COUNT_AT])
        for lexeme in lexemes_of(values[TERMS_AT]):
            dfs[(*scope, lexeme)] = dfs.get((*scope, lexeme), 0) + 1
        if memory.is_current:
            aliases += [
                (tenant, memory.id, str(memory.version), fold(a), len(rows) - 1)
                for a in memory.aliases
            ]
    if not rows:
        return 0
    return _write(store, rows, aliases, state, dfs)


def _session_of(memory: MemoryVersion) -> tuple[str, str, str, str] | None:
    session = memory.provenance.session_id
    if session is None:
        return None
    return (memory.tenant_id, memory.scope.value, memory.owner, session)


def _seeded_context(store: PostgresStore, memories: list[MemoryVersion]) -> SessionContext:
    """Context keys for a batch, starting from each session's latest stored memory."""
    chain = SessionContext()
    sessions = sorted({s for s in map(_session_of, memories) if s is not None})
    if not sessions:
        return chain
    with store._conn() as conn:
        for tenant in sorted({s[0] for s in sessions}):
            mine = [s for s in sessions if s[0] == tenant]
            for scope, owner, session, family, text, aliases, observed_at in conn.execute(
                "SELECT DISTINCT ON (scope, owner, provenance->>'session_id') scope, owner,"
                " provenance->>'session_id', id, text, aliases, observed_at FROM memory_versions"
                " WHERE tenant_id = %s AND provenance->>'session_id' IS NOT NULL AND (scope,"
                " owner, provenance->>'session_id') IN (SELECT * FROM unnest(%s::text[],"
                " %s::text[], %s::text[])) ORDER BY scope, owner, provenance->>'session_id',"
                " key DESC",
                (tenant, [s[1] for s in mine], [s[2] for s in mine], [s[3] for s in mine]),
            ):
                own = document_tokens(text, aliases, observed_at)
                # the context before that row is not looked up: it only matters when a batch
                # starts with a new version of the very family stored last in the session
                chain.seed((tenant, scope, owner, session), str(family), own, [])
    return chain


def _present(store: PostgresStore, families: set[tuple[str, str]]) -> set[tuple[str, str, int]]:
    by_tenant: dict[str, list[str]] = {}
    for tenant, ident in families:
        by_tenant.setdefault(tenant, []).append(ident)
    found: set[tuple[str, str, int]] = set()
    with store._conn() as conn:
        for tenant, ids in by_tenant.items():
            for start in range(0, len(ids), _EXISTING_CHUNK):
                for ident, version in conn.execute(
                    "SELECT id, version FROM memory_versions WHERE tenant_id = %s AND id = ANY(%s)",
                    (tenant, ids[start : start + _EXISTING_CHUNK]),
                ):
                    found.add((tenant, str(ident), int(version)))
    return found


def _write(
    store: PostgresStore,
    rows: list[tuple[Any, ...]],
    aliases: list[tuple[str, str, str, str, int]],
    state: dict[tuple[str, str, str], list[int]],
    dfs: dict[tuple[str, str, str, str], int],
) -> int:
    stage_columns = ["ord", "tenant_number", *WRITE_COLUMNS]
    stage_types = ["integer", "bigint", *(_STAGE_TYPES.get(c, "text") for c in WRITE_COLUMNS)]
    column_defs = ", ".join(f"{c} {t}" for c, t in zip(stage_columns, stage_types, strict=True))
    select = ", ".join(f"{c}{_CASTS.get(c, '')}" for c in WRITE_COLUMNS)
    with store._tx() as conn:
        conn.execute(f"CREATE TEMP TABLE quipu_import ({column_defs}) ON COMMIT DROP")
        with conn.cursor().copy(
            f"COPY quipu_import ({', '.join(stage_columns)}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(stage_types)
            for row in rows:
                copy.write_row(row)
        inserted = conn.execute(
            f"INSERT INTO memory_versions (key, {', '.join(WRITE_COLUMNS)})"
            f" SELECT tenant_number * {KEY_SPAN} + nextval('memory_key_seq'), {select}"
            " FROM quipu_import ORDER BY ord"
            " ON CONFLICT (tenant_id, id, version) DO NOTHING RETURNING tenant_id, id, version, key"
        ).fetchall()
        keys = {(str(t), str(i), int(v)): int(k) for t, i, v, k in inserted}
        alias_rows = [
            (tenant, rows[at][3], rows[at][4], folded, keys[(tenant, ident, int(version))])
            for tenant, ident, version, folded, at in aliases
            if (tenant, ident, int(version)) in keys
        ]
        if alias_rows:
            conn.cursor().executemany(
                "INSERT INTO memory_aliases (tenant_id, scope, owner, folded, key)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                alias_rows,
            )
        conn.cursor().executemany(
            "INSERT INTO scope_state AS st (tenant_id, scope, owner, live_count, current_count,"
            " version_count, term_total) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant_id, scope, owner) DO UPDATE SET"
            " live_count = st.live_count + excluded.live_count,"
            " current_count = st.current_count + excluded.current_count,"
            " version_count = st.version_count + excluded.version_count,"
            " term_total = st.term_total + excluded.term_total",
            [(*scope, *counts) for scope, counts in sorted(state.items())],
        )
        # Scopes that keep term statistics get this batch's counts; a scope this import made
        # large starts keeping them (counted once from its rows, this batch included).
        tracked = {
            (str(t), str(s), str(o)): (bool(k), int(n))
            for t, s, o, k, n in conn.execute(
                "SELECT tenant_id, scope, owner, terms_tracked, version_count FROM scope_state"
                " WHERE (tenant_id, scope, owner) IN (SELECT * FROM unnest(%s::text[],"
                " %s::text[], %s::text[]))",
                [list(c) for c in zip(*state, strict=True)],
            ).fetchall()
        }
        conn.cursor().executemany(
            "INSERT INTO scope_terms AS x (tenant_id, scope, owner, lexeme, df)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, scope, owner, lexeme)"
            " DO UPDATE SET df = x.df + excluded.df",
            [(*key, df) for key, df in sorted(dfs.items()) if tracked[key[:3]][0]],
        )
    for scope, (is_tracked, versions) in sorted(tracked.items()):
        if not is_tracked and versions > store.plan.text_exact_matches:
            with store._conn() as conn:
                track_terms(conn, ScopeRef(scope[0], Scope(scope[1]), scope[2]))
    return len(inserted)


def export_versions(
    store: PostgresStore, tenant_id: str | None
) -> Iterator[tuple[MemoryVersion, Vector | None]]:
    """Every version in (tenant, id, version) order, streamed through a server-side cursor."""
    where, params = ("WHERE tenant_id = %s", (tenant_id,)) if tenant_id else ("", ())
    with store._tx() as conn, conn.cursor(name="quipu_export", binary=True) as cur:
        cur.itersize = 2000
        cur.execute(
            f"SELECT {COLUMNS}, vector FROM memory_versions {where}"
            " ORDER BY tenant_id, id, version",
            params,
        )
        for r in cur:
            memory = decode_row(to_record, r, r[0])
            if memory is None:
                continue
            vector = r[28]
            yield memory, None if vector is None else np.array(vector.to_numpy(), dtype=np.float32)


def refresh_terms(store: PostgresStore) -> bool:
    """Recompute every stored BM25 key when the tokenizer changed since they were written
    (``TOKENIZER_VERSION``), with the scopes' lengths; term statistics restart from scratch
    (:meth:`PostgresStore.maintain` tracks large scopes again). Returns whether it ran."""
    with store._conn() as conn:
        row = conn.execute("SELECT value FROM store_meta WHERE key = 'terms_version'").fetchone()
        if row is not None and row[0] == TOKENIZER_VERSION:
            return False
    with store._tx() as conn:
        conn.execute("LOCK TABLE scope_state IN EXCLUSIVE MODE")
        row = conn.execute("SELECT value FROM store_meta WHERE key = 'terms_version'").fetchone()
        if row is not None and row[0] == TOKENIZER_VERSION:
            return False  # another process did it while this one waited
        keys = conn.execute(
            "SELECT tenant_id, key, scope, owner, provenance->>'session_id', id, text, aliases,"
            " observed_at FROM memory_versions ORDER BY tenant_id, key"
        )
        updates = []
        chain = SessionContext()
        for tenant_id, key, scope, owner, session, family, text, aliases, at in keys.fetchall():
            own = document_tokens(text, aliases, at)
            where = None if session is None else (tenant_id, scope, owner, session)
            terms, length = tsvector_literal(indexed_keys(own, chain.next(where, family, own)))
            updates.append((terms, length, tenant_id, key))
        conn.cursor().executemany(
            "UPDATE memory_versions SET terms = %s::tsvector, term_count = %s"
            " WHERE tenant_id = %s AND key = %s",
            updates,
        )
        conn.execute(
            "UPDATE scope_state s SET terms_tracked = false, term_total = COALESCE((SELECT"
            " sum(term_count) FROM memory_versions m WHERE m.tenant_id = s.tenant_id"
            " AND m.scope = s.scope AND m.owner = s.owner), 0)"
        )
        conn.execute("DELETE FROM scope_terms")
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES ('terms_version', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (TOKENIZER_VERSION,),
        )
    return True
