"""Candidate search inside one scope: exact or per-scope HNSW kNN, and BM25 over stored terms.

Why not one global HNSW index (RECALL-5). With it, the planner happily answers
``WHERE tenant_id = … ORDER BY vector <=> q LIMIT k`` from the index: the walk finds the
``ef_search`` nearest rows of *all* tenants, the scope filter then drops nearly all of them, and a
small scope silently gets 0-4% of its true neighbours. Iterative scans only soften that. So no
index ever holds more than one scope:

* **exact** (scopes up to ``exact_limit`` current rows, every ``as_of`` read, and any large scope
  whose ANN index is not built yet): the scope's rows come from the btree on (tenant_id, scope,
  owner, …) and are sorted by ``(vector <#> q) + 0``. The ``+ 0`` makes the sort key an
  expression no index can serve, so no plan, generic or custom, can route it through HNSW.
  Exact by construction.
* **ann** (a scope above ``exact_limit``): the scope's own *partial* HNSW index
  (``WHERE tenant_id = … AND scope = … AND owner = …``, built by
  :meth:`PostgresStore.ensure_ann_indexes`), iterative scan, over-fetching
  ``max(limit * overfetch, min_fetch)`` rows that pass the filters, re-ranked exactly. Every row
  the index can return is the scope's own, so the scope filter cannot starve the page. If the
  walk comes back short (a very selective filter), the exact path answers instead.

Planner settings changed with SET are not seen by an already-prepared generic plan, and a generic
plan cannot use a partial index at all (its predicate needs the literal scope). So the ANN query
is never prepared (``prepare=False``: a custom plan with the scope's values, which proves the
index predicate), and its executor settings are ``set_config(..., is_local => true)`` in the same
transaction. The exact query needs no setting, so it may be prepared.

Similarity is the inner product, as on SQLite (the stored vectors are unit length, so this is
the cosine); ``<#>`` is pgvector's negative inner product.

BM25 uses the same tokenizer, formula and per-scope statistics as the SQLite backend: ``N`` and
the average length come from ``scope_state`` (every version in the scope), document frequency
is counted over the scope's rows that contain the term, and term frequency is the number of
positions of the lexeme in the stored ``tsvector``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from quipu.core.query import Candidate, Filters
from quipu.core.records import ScopeRef
from quipu.retrieval.bm25 import K1, B
from quipu.storage.base import EmbeddingPin, Vector
from quipu.storage.postgres.filters import filter_where, scope_where
from quipu.storage.postgres.rows import tsquery_literal


@dataclass(frozen=True)
class SearchPlan:
    """How search chooses and runs its paths (measured in docs/scale-out.md)."""

    #: Scopes with at most this many current rows are searched exactly; larger ones walk their
    #: own HNSW index. The exact scan costs ~1 us per row, the walk about the same whatever the
    #: scope: they cross near 4,000 rows (issue 23: at 10,000 the walk took 0.4x the exact
    #: scan's time with every top 10 intact, at 1,000 2.7x; docs/scale-out.md).
    exact_limit: int = 4_000
    #: ANN path: fetch ``max(limit * overfetch, min_fetch)`` candidates before re-ranking.
    overfetch: int = 2
    min_fetch: int = 40
    #: ``hnsw.ef_search`` is at least this (pgvector caps it at 1000).
    ef_search: int = 100
    #: ``hnsw.max_scan_tuples`` for the iterative scan.
    max_scan_tuples: int = 20_000
    #: HNSW build parameters of a scope's ANN index, and the memory its build may use.
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    build_memory_mb: int = 1024
    #: Full text: score every match while the query terms match at most this many rows...
    text_exact_matches: int = 2_000
    #: ...else only the rows of the rarest terms, up to this many matches (MaxScore, above).
    text_budget: int = 250


#: Candidates and the session each was written in (``None``: no session), read with the row so
#: recall's session aggregate needs no second round trip.
Found = tuple[list[Candidate], dict[int, str | None]]

#: The session column of a memory row (``m``) in a select list.
SESSION = "m.provenance->>'session_id'"


def _found(rows: Sequence[Any], *, sign: float) -> Found:
    """(key, score or distance, session) rows as :data:`Found`; ``sign`` -1 turns pgvector's
    negative inner product into a similarity."""
    candidates = [Candidate(int(r[0]), sign * float(r[1])) for r in rows]
    return candidates, {int(r[0]): (None if r[2] is None else str(r[2])) for r in rows}


def bm25_term(idf: str, tf: str, length: str) -> str:
    """One term's Okapi BM25 contribution as SQL over the given columns (parameters ``k1``,
    ``b`` and ``avgdl``): the formula of :mod:`quipu.retrieval.bm25`, shared by every text
    query here so they cannot drift apart."""
    norm = f"%(k1)s * (1 - %(b)s + %(b)s * {length} / %(avgdl)s)"
    return f"{idf} * {tf} * (%(k1)s + 1) / ({tf} + {norm})"


def ann_index_name(ref: ScopeRef, pin: EmbeddingPin) -> str:
    """The deterministic name of one scope's partial HNSW index."""
    raw = "\x1f".join((ref.tenant_id, ref.scope.value, ref.owner, pin.model_id, str(pin.dimension)))
    return "memory_versions_ann_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def ann_index_sql(ref: ScopeRef, pin: EmbeddingPin, plan: SearchPlan) -> sql.Composed:
    """A partial HNSW index holding exactly one scope's current, embedded rows."""
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memory_versions USING hnsw"
        " ((vector::vector({dim})) vector_ip_ops) WITH (m = {m}, ef_construction = {efc})"
        " WHERE tenant_id = {t} AND scope = {s} AND owner = {o} AND is_current"
        " AND embedding_model = {model}"
    ).format(
        name=sql.Identifier(ann_index_name(ref, pin)),
        dim=sql.Literal(pin.dimension),
        m=sql.Literal(plan.hnsw_m),
        efc=sql.Literal(plan.hnsw_ef_construction),
        t=sql.Literal(ref.tenant_id),
        s=sql.Literal(ref.scope.value),
        o=sql.Literal(ref.owner),
        model=sql.Literal(pin.model_id),
    )


def exact_knn(
    conn: psycopg.Connection[Any],
    ref: ScopeRef,
    vector: Vector,
    filters: Filters,
    limit: int,
    pin: EmbeddingPin,
    *,
    custom_plan: bool = False,
) -> Found:
    """Exact top ``limit`` by inner product over the scope's rows (btree, no vector index).

    ``custom_plan`` plans the statement for these values (never a prepared generic plan): a
    narrow observation window then reads its rows from ``memory_versions_scope_observed``."""
    params: dict[str, Any] = {"q": vector, "model": pin.model_id, "limit": limit}
    where = f"{scope_where(ref, params)} AND {filter_where(filters, params)}"
    # Rank keys by distance first, computed once per row (``+ 0`` in the select list, sorted by
    # its alias), then read the session of the ``limit`` rows kept only: the session is in a
    # json column, parsed per row, and parsing it for every row of the scope cost a fifth of
    # the scan (issue 23 finding 2).
    rows = conn.execute(
        f"SELECT r.key, r.d, {SESSION} FROM ("
        " SELECT m.key, (m.vector <#> %(q)b) + 0 AS d FROM memory_versions m"
        f" WHERE {where} AND m.embedding_model = %(model)s AND m.vector IS NOT NULL"
        " ORDER BY d, m.key LIMIT %(limit)s"
        ") r JOIN memory_versions m ON m.tenant_id = %(t)s AND m.key = r.key"
        " ORDER BY r.d, r.key",
        params,
        prepare=False if custom_plan else None,
    ).fetchall()
    return _found(rows, sign=-1.0)


def window_rows(
    conn: psycopg.Connection[Any], ref: ScopeRef, filters: Filters, cap: int
) -> int | None:
    """How many of the scope's current rows were observed inside ``filters``' window, counted
    up to ``cap`` (an index-only scan of ``memory_versions_scope_observed``); ``None`` when the
    filters name no window or read ``as_of`` (those rows need not be current).

    A question naming a date searches only that window (:mod:`quipu.retrieval.temporal`). In a
    large scope a narrow window is better served by the exact scan of its few rows than by the
    scope's HNSW walk, which must visit most of the graph to find rows passing the filter (and,
    coming back short, fell back to an exact scan of the whole scope); an empty window needs no
    search at all (issue 23 finding 1)."""
    if filters.as_of is not None or (
        filters.observed_after is None and filters.observed_before is None
    ):
        return None
    params: dict[str, Any] = {"cap": cap}
    where = [scope_where(ref, params), "m.is_current"]
    if filters.observed_after is not None:
        params["w_after"] = filters.observed_after
        where.append("m.observed_at >= %(w_after)s")
    if filters.observed_before is not None:
        params["w_before"] = filters.observed_before
        where.append("m.observed_at < %(w_before)s")
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memory_versions m"
        f" WHERE {' AND '.join(where)} LIMIT %(cap)s) w",
        params,
        prepare=False,
    ).fetchone()
    return 0 if row is None else int(row[0])


def ann_knn(
    conn: psycopg.Connection[Any],
    ref: ScopeRef,
    vector: Vector,
    filters: Filters,
    limit: int,
    pin: EmbeddingPin,
    plan: SearchPlan,
    *,
    distributed: bool = False,
) -> Found:
    """The scope's own HNSW index (iterative scan), over-fetched and exactly re-ranked.

    With ``distributed`` (Citus) the walk runs on the tenant's worker, which sees no
    ``set_config`` of the coordinator's transaction: there the settings are ``SET LOCAL`` with
    ``citus.propagate_set_commands = local``, which Citus replays on the worker connection."""
    fetch = max(limit * plan.overfetch, plan.min_fetch)
    params: dict[str, Any] = {
        "q": vector,
        "model": pin.model_id,
        "fetch": fetch,
        "limit": limit,
        "ef": str(min(max(plan.ef_search, fetch), 1000)),
        "max_scan": str(plan.max_scan_tuples),
    }
    where = f"{scope_where(ref, params)} AND {filter_where(filters, params)}"
    cast = f"m.vector::vector({int(pin.dimension)})"
    # One round trip for BEGIN, the settings and the search (pipeline mode); COMMIT is another.
    with conn.pipeline(), conn.transaction():
        if distributed:
            conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            for name, value in (
                ("hnsw.ef_search", params["ef"]),
                ("hnsw.iterative_scan", "relaxed_order"),
                ("hnsw.max_scan_tuples", params["max_scan"]),
            ):
                conn.execute(sql.SQL(f"SET LOCAL {name} = {{}}").format(sql.Literal(value)))
        else:
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %(ef)s, true),"
                " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.max_scan_tuples', %(max_scan)s, true)",
                params,
                prepare=False,
            )
        rows = conn.execute(
            "SELECT key, d, session FROM ("
            f" SELECT m.key, {cast} <#> %(q)b AS d, {SESSION} AS session FROM memory_versions m"
            f" WHERE {where} AND m.is_current AND m.embedding_model = %(model)s"
            f" ORDER BY {cast} <#> %(q)b LIMIT %(fetch)s"
            ") ann ORDER BY d, key LIMIT %(limit)s",
            params,
            prepare=False,
        ).fetchall()
    return _found(rows, sign=-1.0)


def bm25(
    conn: psycopg.Connection[Any],
    ref: ScopeRef,
    keys: Mapping[str, float],
    filters: Filters,
    limit: int,
    plan: SearchPlan,
) -> tuple[Found, str, int]:
    """Top ``limit`` rows passing ``filters`` by BM25: ((candidates, their sessions), path, rows
    matched).

    Exact while the query terms match at most ``plan.text_exact_matches`` rows in the scope.
    Beyond, the candidates are every row holding one of the rarest terms (up to
    ``plan.text_budget`` matches) plus the ``text_budget`` most recent rows holding any term,
    each scored on every term. The page is still exact when the best score a left-out row could
    reach (the sum of the other terms' ``idf * (k1 + 1)``) is below the k-th score found
    (MaxScore); otherwise it is labelled ``bm25-tsvector:bounded``.

    ``keys`` are the query's lexemes with a weight each
    (:func:`~quipu.retrieval.expansion.query_keys`): a key's idf is multiplied by it.
    """
    weight = {k: w for k, w in keys.items() if w > 0}
    lexemes = list(weight)
    if not lexemes or limit <= 0:
        return ([], {}), "bm25-tsvector", 0
    stats = scope_statistics(conn, ref, lexemes)
    if stats is None:
        return ([], {}), "bm25-tsvector", 0
    n, total_terms, tracked = stats
    avgdl = total_terms / n if total_terms > 0 else 1.0
    if tracked is None and n <= plan.text_exact_matches:
        return small_scope_bm25(conn, ref, weight, filters, limit, n=n, avgdl=avgdl)
    # else count now: a large scope whose statistics maintenance has not started yet
    dfs = count_terms(conn, ref, lexemes) if tracked is None else tracked
    if not dfs:
        return ([], {}), "bm25-tsvector", 0
    terms = sorted(dfs, key=lambda t: (dfs[t], t))  # rarest first
    idf = {t: weight[t] * math.log(1.0 + (n - dfs[t] + 0.5) / (dfs[t] + 0.5)) for t in terms}
    exact = sum(dfs.values()) <= plan.text_exact_matches
    rare: list[str] = []
    if not exact:
        for t in terms:
            if sum(dfs[r] for r in rare) + dfs[t] > plan.text_budget:
                break
            rare.append(t)
    params: dict[str, Any] = {
        "lex": terms,
        "idf": [idf[t] for t in terms],
        "tsq": tsquery_literal(terms),
        "rare": tsquery_literal(rare),
        "budget": plan.text_budget,
        "avgdl": avgdl,
        "limit": limit,
        "k1": K1,
        "b": B,
    }
    passes = filter_where(filters, params)
    where = f"{scope_where(ref, params)} AND {passes}"
    if exact:
        candidates = f"{where} AND m.terms @@ %(tsq)s::tsquery"
    else:
        # every row holding a rare term, and the most recent rows holding any term. The rows
        # holding a term come from the GIN index first (OFFSET 0 keeps the planner from
        # walking the recency index instead, testing every row's terms on the way: 62,773
        # rows and 21,638 pages for one 100k-scope query whose matches were not recent; issue
        # 23), then the most recent of them are kept.
        recent = (
            "(SELECT h.key FROM (SELECT m.key, m.recorded_at, m.id FROM memory_versions m"
            f" WHERE {where} AND m.terms @@ %(tsq)s::tsquery OFFSET 0) h"
            " ORDER BY h.recorded_at DESC, h.id DESC LIMIT %(budget)s)"
        )
        walk = recency_walk(n, dfs, filters, plan)
        if walk is not None:
            params["walk"] = walk
            recent = recent_by_walk(passes, recent)
        if rare:
            recent = (
                f"SELECT m.key FROM memory_versions m WHERE {where}"
                f" AND m.terms @@ %(rare)s::tsquery UNION {recent}"
            )
        candidates = f"m.tenant_id = %(t)s AND m.key IN ({recent})"
    found = conn.execute(
        # each row's terms summed in lexeme order: the same float whatever the plan, so rows of
        # equal score keep one order (by key) on every path
        f"SELECT m.key, sum({bm25_term('q.idf', 'u.tf', 'm.term_count')} ORDER BY u.lexeme)"
        f" AS score, {SESSION}"
        " FROM memory_versions m CROSS JOIN LATERAL ("
        "  SELECT lexeme, cardinality(positions) AS tf"
        "  FROM unnest(ts_filter(setweight(m.terms, 'A', %(lex)s), '{a}'))) AS u"
        " JOIN unnest(%(lex)s::text[], %(idf)s::float8[]) AS q(lexeme, idf) USING (lexeme)"
        f" WHERE {candidates}"
        f" GROUP BY m.key, {SESSION} ORDER BY score DESC, m.key LIMIT %(limit)s",
        params,
        # prepared from its fifth run on a connection (psycopg's default): the statement's
        # shape depends only on the filters and the path, and planning it each time cost
        # ~15 % of the stage (602 LoCoMo searches, 10k scope: p50 0.86x, p95 0.91x, every
        # page the same rows and scores; issue 23)
        prepare=None,
    ).fetchall()
    result = _found(found, sign=1.0)
    out = result[0]
    if exact:
        return result, "bm25-tsvector", sum(dfs.values())
    # Rows left out hold none of the rare terms, so they score below the sum of the other
    # terms' upper bounds; if that is under the k-th score, the page is exact (MaxScore).
    left_out = sum(idf[t] * (K1 + 1) for t in terms if t not in rare)
    matched = sum(dfs[t] for t in rare) + plan.text_budget
    if len(out) == limit and left_out < out[-1].score:
        return result, "bm25-tsvector+maxscore", matched
    return result, "bm25-tsvector:bounded", matched


def recency_walk(n: int, dfs: Mapping[str, int], filters: Filters, plan: SearchPlan) -> int | None:
    """At most how many of the scope's most recent rows to walk for "the ``text_budget`` most
    recent rows holding any term", or ``None`` to take them from the GIN index (which reads
    every matching row to learn its time: between the most frequent term's count and the sum of
    the counts).

    The walk stops as soon as it has ``text_budget`` of them: with matches spread over time,
    after about ``text_budget * n / matches`` rows. It is tried when that, counting only the
    most frequent term, is below what the GIN path would read at most, and walks no further
    than that (so a failed walk and the GIN path after it cost at most twice the GIN path
    alone). A 4x slack for matches bunched in the past was dropped: on LoCoMo's 351 questions
    in a 100k scope it left 38 walks untried, no walk of the others failed, and the rows read
    went from 837k to 606k (issue 23). Not for ``as_of`` reads (not the
    current rows, so not in the recency index's order), nor inside an observation window (a
    dated question's: its rows are rarely the scope's most recent, so the walk would find too
    few and the GIN index answer anyway)."""
    if filters.as_of is not None or not dfs:
        return None
    if filters.observed_after is not None or filters.observed_before is not None:
        return None
    gin = min(n, sum(dfs.values()))
    expected = plan.text_budget * n // max(*dfs.values(), 1)
    return gin if expected < gin else None


def recent_by_walk(passes: str, gin_first: str) -> str:
    """The most recent ``budget`` rows holding any term and passing the filters (``passes``),
    found by walking the scope's current rows from the most recent (the recency index,
    ``memory_versions_scope_current``), testing each, until ``budget`` pass or ``walk`` rows
    were read; only when fewer than ``budget`` passed does ``gin_first`` run (a one-time
    filter). So the rows are always ``gin_first``'s: any row more recent than the last one
    kept was walked."""
    return (
        "(WITH walk AS (SELECT m.key, m.recorded_at, m.id,"
        f" ({passes}) AND m.terms @@ %(tsq)s::tsquery AS hit FROM memory_versions m"
        " WHERE m.tenant_id = %(t)s AND m.scope = %(s)s AND m.owner = %(o)s AND m.is_current"
        " ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(walk)s),"
        " hits AS MATERIALIZED (SELECT key, recorded_at, id FROM walk WHERE hit"
        " ORDER BY recorded_at DESC, id DESC LIMIT %(budget)s)"
        f" SELECT key FROM hits UNION ALL SELECT g.key FROM {gin_first} g"
        " WHERE (SELECT count(*) FROM hits) < %(budget)s)"
    )


def small_scope_bm25(
    conn: psycopg.Connection[Any],
    ref: ScopeRef,
    keys: Mapping[str, float],
    filters: Filters,
    limit: int,
    *,
    n: int,
    avgdl: float,
) -> tuple[Found, str, int]:
    """Exact BM25 in a scope without ``scope_terms`` (at most ``text_exact_matches`` versions):
    document frequencies are counted over the scope's matching rows and every match is scored,
    in one statement and one pass over the rows (the same figures as :func:`count_terms`
    followed by the exact query, one round trip and one scan fewer)."""
    lexemes = list(keys)
    params: dict[str, Any] = {
        "lex": lexemes,
        "weight": [keys[k] for k in lexemes],
        "tsq": tsquery_literal(lexemes),
        "n": float(n),
        "avgdl": avgdl,
        "limit": limit,
        "k1": K1,
        "b": B,
    }
    scope = scope_where(ref, params)
    rows = conn.execute(
        "WITH hit AS MATERIALIZED ("
        f" SELECT m.key, {SESSION} AS session, m.term_count, ({filter_where(filters, params)})"
        "  AS ok, u.lexeme, cardinality(u.positions) AS tf"
        " FROM memory_versions m"
        " CROSS JOIN LATERAL unnest(ts_filter(setweight(m.terms, 'A', %(lex)s), '{a}')) AS u"
        f" WHERE {scope} AND m.terms @@ %(tsq)s::tsquery),"
        " q AS (SELECT lexeme, count(*) AS df,"
        "  w.weight * ln(1 + (%(n)s - count(*) + 0.5) / (count(*) + 0.5)) AS idf"
        "  FROM hit JOIN unnest(%(lex)s::text[], %(weight)s::float8[]) AS w(lexeme, weight)"
        "  USING (lexeme) GROUP BY lexeme, w.weight)"
        # one row even when nothing passes the filters, to carry the match count
        " SELECT s.key, s.score, s.session, t.matched"
        " FROM (SELECT coalesce(sum(df), 0) AS matched FROM q) t LEFT JOIN LATERAL ("
        f"  SELECT h.key, sum({bm25_term('q.idf', 'h.tf', 'h.term_count')} ORDER BY h.lexeme)"
        "  AS score, h.session"
        "  FROM hit h JOIN q USING (lexeme) WHERE h.ok"
        "  GROUP BY h.key, h.session ORDER BY score DESC, h.key LIMIT %(limit)s) s ON true"
        " ORDER BY s.score DESC, s.key",
        params,
        prepare=False,
    ).fetchall()
    matched = int(rows[0][3]) if rows else 0
    return _found([r for r in rows if r[0] is not None], sign=1.0), "bm25-tsvector", matched


def scope_statistics(
    conn: psycopg.Connection[Any], ref: ScopeRef, lexemes: list[str]
) -> tuple[int, int, dict[str, int] | None] | None:
    """(versions, total terms, each of ``lexemes``' document frequency from ``scope_terms``,
    those no row holds left out) in one statement; the frequencies are ``None`` while the
    scope's terms are not tracked, and the whole is ``None`` for a scope never written."""
    rows = conn.execute(
        "SELECT s.version_count, s.term_total, s.terms_tracked, t.lexeme, t.df"
        " FROM scope_state s LEFT JOIN scope_terms t ON s.terms_tracked"
        " AND t.tenant_id = s.tenant_id AND t.scope = s.scope AND t.owner = s.owner"
        " AND t.lexeme = ANY(%s) WHERE s.tenant_id = %s AND s.scope = %s AND s.owner = %s",
        (lexemes, ref.tenant_id, ref.scope.value, ref.owner),
    ).fetchall()
    if not rows:
        return None
    tracked = {str(r[3]): int(r[4]) for r in rows if r[3] is not None and r[4] > 0}
    return int(rows[0][0]), int(rows[0][1]), tracked if rows[0][2] else None


def key_frequencies(
    conn: psycopg.Connection[Any], ref: ScopeRef, lexemes: list[str]
) -> tuple[int, dict[str, int]]:
    """The scope's version count and the document frequency of each of ``lexemes`` (those no
    row holds left out): the figures :func:`bm25` computes its idf from, read the same way."""
    stats = scope_statistics(conn, ref, lexemes)
    if stats is None:
        return 0, {}
    n, _, tracked = stats
    if tracked is not None or not lexemes:
        return n, tracked or {}
    return n, count_terms(conn, ref, lexemes)


def count_terms(conn: psycopg.Connection[Any], ref: ScopeRef, lexemes: list[str]) -> dict[str, int]:
    """Document frequency of ``lexemes`` in the scope, counted now (scopes without
    ``scope_terms``: small ones, where the count is cheap)."""
    params: dict[str, Any] = {"lex": lexemes, "tsq": tsquery_literal(lexemes)}
    rows = conn.execute(
        "SELECT u.lexeme, count(*) FROM memory_versions m CROSS JOIN LATERAL"
        " unnest(ts_filter(setweight(m.terms, 'A', %(lex)s), '{a}')) AS u"
        f" WHERE {scope_where(ref, params)} AND m.terms @@ %(tsq)s::tsquery GROUP BY u.lexeme",
        params,
        prepare=False,
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def track_terms(conn: psycopg.Connection[Any], ref: ScopeRef) -> None:
    """Start keeping ``scope_terms`` for a scope: lock it, count every term once, flag it.
    From then on each write of the scope adds its terms in the same statement."""
    scope = (ref.tenant_id, ref.scope.value, ref.owner)
    with conn.transaction():
        row = conn.execute(
            "SELECT terms_tracked FROM scope_state WHERE tenant_id = %s AND scope = %s"
            " AND owner = %s FOR UPDATE",
            scope,
        ).fetchone()
        if row is None or row[0]:
            return
        conn.execute(
            "DELETE FROM scope_terms WHERE tenant_id = %s AND scope = %s AND owner = %s", scope
        )
        conn.execute(
            "INSERT INTO scope_terms (tenant_id, scope, owner, lexeme, df)"
            " SELECT %s, %s, %s, u.lexeme, count(*) FROM memory_versions m"
            " CROSS JOIN LATERAL unnest(m.terms) AS u"
            " WHERE m.tenant_id = %s AND m.scope = %s AND m.owner = %s GROUP BY u.lexeme",
            (*scope, *scope),
        )
        conn.execute(
            "UPDATE scope_state SET terms_tracked = true WHERE tenant_id = %s AND scope = %s"
            " AND owner = %s",
            scope,
        )


def scope_vectors(conn: psycopg.Connection[Any], ref: ScopeRef) -> list[Vector]:
    """Every current vector of the scope (the numpy floor of ``quipu bench scale``)."""
    params: dict[str, Any] = {}
    rows = conn.execute(
        f"SELECT m.vector FROM memory_versions m WHERE {scope_where(ref, params)}"
        " AND m.is_current AND m.vector IS NOT NULL",
        params,
    ).fetchall()
    return [np.asarray(r[0].to_numpy(), dtype=np.float32) for r in rows]


def exact_scan_floor(
    conn: psycopg.Connection[Any], ref: ScopeRef, vector: Vector, limit: int
) -> list[int]:
    """pgvector's exact scan of the scope alone: the scope's btree, the distance, the sort —
    no filter, no session, nothing else (the floor :func:`exact_knn` is measured against)."""
    params: dict[str, Any] = {"q": vector, "limit": limit}
    rows = conn.execute(
        f"SELECT m.key FROM memory_versions m WHERE {scope_where(ref, params)} AND m.is_current"
        " ORDER BY (m.vector <#> %(q)b) + 0 LIMIT %(limit)s",
        params,
        prepare=False,
    ).fetchall()
    return [int(r[0]) for r in rows]
