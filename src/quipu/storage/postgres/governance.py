"""Erase, legal holds, snapshots, projects and tenant-wide reads on PostgreSQL (a mixin of
:class:`PostgresStore`; LIFE-4..8, SCOPE-6, SCOPE-8).

An erase rewrites every version row of the family without its content in one transaction,
under the scope owners' row locks (as every version write takes them). PostgreSQL keeps the
old row images as dead tuples until a vacuum: :meth:`GovernanceTables.reclaim` runs the
``VACUUM (FULL, ANALYZE)`` that rewrites the tables holding memory content, after which the
relation files on disk no longer hold it (docs/data-lifecycle.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.auth import Actor, version_audit
from quipu.core.governance import (
    EraseReport,
    Erasure,
    Hold,
    HoldKind,
    erased_provenance,
    session_subject,
    subject_of,
    tombstone,
)
from quipu.core.lifecycle import LIVE
from quipu.core.records import MemoryVersion, Provenance, Relation, Scope, ScopeRef, Status
from quipu.core.versions import Change
from quipu.errors import NotFound
from quipu.storage.admission import admit
from quipu.storage.base import Vector
from quipu.storage.joined import joined_to
from quipu.storage.postgres.registry import active_holds, hold_lock
from quipu.storage.postgres.rows import (
    COLUMNS,
    KEY_SPAN,
    WRITE_COLUMNS,
    to_record,
    to_values,
)

_SEP = "\x1f"
#: Tables whose rows hold memory content or what quotes it: what :meth:`reclaim` rewrites.
CONTENT_TABLES = (
    "memory_versions",
    "memory_aliases",
    "scope_terms",
    "audit_log",
    "jobs",
    "session_turns",
    "session_watermarks",
    "sessions",
    "session_owners",
    "legal_holds",
    "snapshots",
    "kv_entries",
    "documents",
    "doc_chunks",
    "knowledge_versions",
    "usage_events",
    "memory_usage",
    "memory_index_versions",  # an erasure rewrites the index versions that quoted it
    "graph_entities",  # and deletes what the graph read from its text
    "graph_aliases",
    "graph_facts",
    "graph_mentions",
)


class GovernanceTables:
    """Needs the store's connections, ``_tenant_number()``, ``_write_params()`` and
    ``_append()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _tenant_number(self, tenant_id: str) -> int:
        raise NotImplementedError

    def _write_params(
        self,
        number: int,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        end: datetime | None,
        live_delta: int,
        current_delta: int,
        context: Sequence[str] = (),
        *,
        by: Actor,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _append(
        self,
        conn: psycopg.Connection[Any],
        number: int,
        ref: ScopeRef,
        memory_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        now: datetime,
        quota: int,
        by: Actor,
    ) -> MemoryVersion:
        raise NotImplementedError

    # -- merge (LIFE-7) ----------------------------------------------------------------------
    def merge(
        self,
        ref: ScopeRef,
        survivor_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        others: Sequence[str],
        now: datetime,
        *,
        by: Actor,
    ) -> MemoryVersion:
        admit(change)
        number = self._tenant_number(ref.tenant_id)
        with self._tx() as conn:
            found = {
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM memory_versions WHERE tenant_id = %s AND scope = %s"
                    " AND owner = %s AND is_current AND id = ANY(%s)",
                    (ref.tenant_id, ref.scope.value, ref.owner, list(others)),
                )
            }
            for other in others:
                if other not in found:
                    raise NotFound(f"no memory {other}", details={"id": other})
            merged = self._append(
                conn,
                number,
                ref,
                survivor_id,
                change,
                expected_version,
                vector,
                embedding_key,
                now,
                2**62,
                by,
            )
            for other in others:
                gone = Change(
                    actor=change.actor,
                    relation=Relation.SUPERSEDED_BY,
                    reason=change.reason,
                    status=Status.SUPERSEDED,
                    invalid_at=now,
                    related_id=survivor_id,
                )
                self._append(conn, number, ref, other, gone, None, None, None, now, 2**62, by)
            return merged

    # -- erase (LIFE-4) ----------------------------------------------------------------------
    def erase_families(
        self, tenant_id: str, memory_ids: Sequence[str], erasure: Erasure
    ) -> EraseReport:
        admit(erasure)
        report = EraseReport()
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return report
        number = self._tenant_number(tenant_id)
        with self._tx() as conn:
            refs = sorted(
                {
                    (str(s), str(o))
                    for s, o in conn.execute(
                        "SELECT DISTINCT scope, owner FROM memory_versions WHERE tenant_id = %s"
                        " AND is_current AND id = ANY(%s)",
                        (tenant_id, ids),
                    )
                }
            )
            for scope, owner in refs:  # in one order, as every writer of a scope takes it
                conn.execute(
                    "INSERT INTO scope_state AS st (tenant_id, scope, owner) VALUES (%s, %s, %s)"
                    " ON CONFLICT (tenant_id, scope, owner) DO UPDATE SET"
                    " live_count = st.live_count",
                    (tenant_id, scope, owner),
                )
            current = (
                conn.cursor(binary=True)
                .execute(
                    f"SELECT {COLUMNS} FROM memory_versions WHERE tenant_id = %s AND is_current"
                    " AND status <> 'erased' AND id = ANY(%s) ORDER BY key",
                    (tenant_id, ids),
                )
                .fetchall()
            )
            if not current:
                return report
            records = [to_record(r) for r in current]
            erased = [m.id for m in records]
            versions = conn.execute(
                "SELECT key, scope, owner, text, provenance, term_count FROM memory_versions"
                " WHERE tenant_id = %s AND id = ANY(%s)",
                (tenant_id, erased),
            ).fetchall()
            texts = {str(r[3]) for r in versions if r[3]}
            texts |= {str(q) for r in versions if (q := (r[4] or {}).get("quote"))}
            keys = [int(r[0]) for r in versions]
            _drop_terms(conn, tenant_id, keys)
            terms: dict[tuple[str, str], int] = {}
            for _, scope, owner, _, _, count in versions:
                terms[(scope, owner)] = terms.get((scope, owner), 0) + int(count)
            conn.execute(  # one statement for the batch
                "UPDATE memory_versions m SET text = '', tags = '{}', metadata = '{}'::json,"
                " aliases = '{}', provenance = u.p::json, reason = NULL, terms = ''::tsvector,"
                " term_count = 0, vector = NULL, embedding_key = NULL, embedding_model = NULL"
                " FROM unnest(%s::bigint[], %s::text[]) AS u(k, p)"
                " WHERE m.tenant_id = %s AND m.key = u.k",
                (keys, [_erased_provenance(r[4]) for r in versions], tenant_id),
            )
            report.add("memory_versions", len(versions))
            report.add(
                "memory_aliases",
                conn.execute(
                    "DELETE FROM memory_aliases WHERE tenant_id = %s AND key = ANY(%s)",
                    (tenant_id, keys),
                ).rowcount,
            )
            report.add("audit_log", _scrub_audit(conn, tenant_id, erased))
            report.add("jobs", _scrub_jobs(conn, tenant_id, texts))
            conn.execute(
                "UPDATE memory_versions SET is_current = false, valid_to = %s"
                " WHERE tenant_id = %s AND key = ANY(%s)",
                (erasure.at, tenant_id, [int(r[0]) for r in current]),
            )
            _write_tombstones(conn, number, [tombstone(m, erasure) for m in records], erasure.by)
            live: dict[tuple[str, str], int] = {}
            for memory in records:
                key = (memory.scope.value, memory.owner)
                live[key] = live.get(key, 0) + int(memory.status in LIVE)
                report.families.append(memory.id)
            for (scope, owner), count in terms.items():
                conn.execute(
                    "UPDATE scope_state SET live_count = GREATEST(0, live_count - %s),"
                    " version_count = version_count + %s, term_total = GREATEST(0, term_total"
                    " - %s) WHERE tenant_id = %s AND scope = %s AND owner = %s",
                    (
                        live.get((scope, owner), 0),
                        sum(1 for m in records if (m.scope.value, m.owner) == (scope, owner)),
                        count,
                        tenant_id,
                        scope,
                        owner,
                    ),
                )
            report.add("tombstones", len(records))
        return report

    def subject_families(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        with self._conn() as conn:
            owners = [(Scope.USER.value, user_id)] + [
                (Scope.AGENT_USER.value, str(r[0]))
                for r in conn.execute(
                    "SELECT owner FROM scope_state WHERE tenant_id = %s AND scope = 'agent_user'"
                    " AND split_part(owner, chr(31), 2) = %s",
                    (tenant_id, user_id),
                )
            ]
            found: list[str] = []
            for scope, owner in owners:
                found += [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT id FROM memory_versions WHERE tenant_id = %s AND scope = %s"
                        " AND owner = %s AND is_current AND status <> 'erased' LIMIT %s",
                        (tenant_id, scope, owner, limit - len(found)),
                    )
                ]
                if len(found) >= limit:
                    break
        return found

    def erase_subject_sessions(
        self, tenant_id: str, user_id: str, erasure: Erasure, limit: int
    ) -> EraseReport:
        report = EraseReport()
        with self._conn() as conn:
            owners = [
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT owner FROM sessions WHERE tenant_id = %s"
                    " AND split_part(owner, chr(31), 2) = %s",
                    (tenant_id, user_id),
                )
            ]
        owners = sorted(o for o in owners if session_subject(o) == user_id)
        for owner in owners:
            if report.counts.get("session_turns", 0) >= limit:
                break
            with self._tx() as conn:
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (_SEP.join(("session-owner", tenant_id, owner)),),
                )
                left = limit - report.counts.get("session_turns", 0)
                gone = conn.execute(
                    "DELETE FROM session_turns WHERE (tenant_id, owner, session_id, seq) IN ("
                    " SELECT tenant_id, owner, session_id, seq FROM session_turns"
                    " WHERE tenant_id = %s AND owner = %s LIMIT %s) RETURNING seq",
                    (tenant_id, owner, left),
                ).rowcount
                report.add("session_turns", gone)
                if gone < left:  # the owner's last turns: what the tier holds about it goes too
                    for table in ("session_watermarks", "sessions", "session_owners"):
                        report.add(
                            table,
                            conn.execute(
                                f"DELETE FROM {table} WHERE tenant_id = %s AND owner = %s",
                                (tenant_id, owner),
                            ).rowcount,
                        )
                    report.add("jobs", _scrub_session_jobs(conn, tenant_id, owner))
                else:
                    _shrink_counters(conn, tenant_id, owner)
        return report

    def job_text_erase(
        self, tenant_id: str, *, job_id: str | None = None, user_id: str | None = None
    ) -> int:
        with self._tx() as conn:
            return int(
                conn.execute(
                    "UPDATE jobs SET payload = jsonb_set(payload::jsonb, '{spans}', '[]')::json"
                    " WHERE tenant_id = %s AND CASE WHEN json_typeof(payload->'spans') ="
                    " 'array' THEN json_array_length(payload->'spans') ELSE 0 END > 0"
                    " AND (job_id = %s OR payload->>'user_id' = %s)",
                    (tenant_id, job_id, user_id),
                ).rowcount
            )

    def erase_holds(self, tenant_id: str) -> list[Hold]:
        conn = joined_to(self)
        if conn is None:
            raise RuntimeError("erase_holds reads inside the erase's transaction()")
        # put_hold takes this lock exclusively: a hold set meanwhile waits for the erase to end
        conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (hold_lock(tenant_id),))
        return active_holds(conn, tenant_id)

    def checkpoint(self) -> bool:
        return True  # dead row images go at VACUUM (quipu reclaim; docs/data-lifecycle.md)

    def blocking_holds(self, tenant_id: str, user_id: str | None) -> list[Hold]:
        with self._conn() as conn:
            holds = active_holds(conn, tenant_id)
            if user_id is None:
                return holds
            out = []
            for hold in holds:
                if hold.kind is HoldKind.TENANT or (
                    hold.kind is HoldKind.SUBJECT and hold.target == user_id
                ):
                    out.append(hold)
                elif hold.kind is HoldKind.MEMORY:
                    row = conn.execute(
                        "SELECT scope, owner FROM memory_versions WHERE tenant_id = %s"
                        " AND id = %s AND is_current",
                        (tenant_id, hold.target),
                    ).fetchone()
                    if row and subject_of(ScopeRef(tenant_id, Scope(row[0]), row[1])) == user_id:
                        out.append(hold)
        return out

    def reclaim(self) -> dict[str, object]:
        """``VACUUM (FULL, ANALYZE)`` of every table holding memory content, then a checkpoint:
        dead row images of erased content leave the relation files (docs/data-lifecycle.md).
        Takes an exclusive lock on each table while it is rewritten."""
        done = []
        with self._conn() as conn:
            before = _database_bytes(conn)
            for table in CONTENT_TABLES:
                conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
                done.append(table)
            conn.execute("CHECKPOINT")
            after = _database_bytes(conn)
        return {
            "backend": "postgres",
            "vacuumed": done,
            "bytes_before": before,
            "bytes_after": after,
        }


def _write_tombstones(
    conn: psycopg.Connection[Any], number: int, tombs: Sequence[MemoryVersion], by: Actor
) -> None:
    """Insert each family's tombstone with its audit line naming ``by``, in two pipelined
    statements (the scope counters are updated once per scope by the caller)."""
    columns = ", ".join(WRITE_COLUMNS)
    marks = ", ".join(
        "%s::json" if c in ("metadata", "provenance") else "%s::tsvector" if c == "terms" else "%s"
        for c in WRITE_COLUMNS
    )
    cur = conn.cursor()
    cur.executemany(
        f"INSERT INTO memory_versions (key, {columns})"
        f" VALUES (%s * {KEY_SPAN} + nextval('memory_key_seq'), {marks})",
        [(number, *to_values(t, None, None, None)) for t in tombs],
    )
    audits = [version_audit(t, by) for t in tombs]
    cur.executemany(
        "INSERT INTO audit_log (tenant_id, at, actor_key, role, agent_id, user_id, surface,"
        " action, target_ids, reason, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
        " %s::json)",
        [
            (
                e.tenant_id,
                e.at,
                e.actor_key,
                e.role,
                e.agent_id,
                e.user_id,
                e.surface,
                e.action,
                list(e.target_ids),
                e.reason,
                json.dumps(e.details, sort_keys=True),
            )
            for e in audits
        ],
    )


def _erased_provenance(raw: Any) -> str:
    kept = erased_provenance(Provenance.from_dict(dict(raw or {})))
    return json.dumps(kept.to_dict(), sort_keys=True)


def _drop_terms(conn: psycopg.Connection[Any], tenant_id: str, keys: Sequence[int]) -> None:
    """Take the erased versions' keywords off the BM25 statistics of scopes that keep them."""
    emptied = conn.execute(
        "WITH gone AS (SELECT m.scope, m.owner, lex, count(*) AS n FROM memory_versions m"
        " CROSS JOIN unnest(tsvector_to_array(m.terms)) AS lex"
        " WHERE m.tenant_id = %(t)s AND m.key = ANY(%(k)s) GROUP BY m.scope, m.owner, lex)"
        " UPDATE scope_terms x SET df = x.df - gone.n FROM gone WHERE x.tenant_id = %(t)s"
        " AND x.scope = gone.scope AND x.owner = gone.owner AND x.lexeme = gone.lex"
        " RETURNING x.scope, x.owner, x.lexeme, x.df",
        {"t": tenant_id, "k": list(keys)},
    ).fetchall()
    gone = [r[:3] for r in emptied if int(r[3]) <= 0]
    if gone:
        conn.execute(
            "DELETE FROM scope_terms WHERE tenant_id = %s AND (scope, owner, lexeme) IN"
            " (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))",
            (tenant_id, [g[0] for g in gone], [g[1] for g in gone], [g[2] for g in gone]),
        )


def _scrub_audit(conn: psycopg.Connection[Any], tenant_id: str, ids: Sequence[str]) -> int:
    """Drop the reasons of audit lines about the erased families (they may quote them)."""
    return conn.execute(
        "UPDATE audit_log SET reason = NULL WHERE tenant_id = %s AND reason IS NOT NULL"
        " AND target_ids && %s::text[]",
        (tenant_id, list(ids)),
    ).rowcount


def _scrub_jobs(conn: psycopg.Connection[Any], tenant_id: str, texts: set[str]) -> int:
    """Clear the checkpoint, result and error of the tenant's jobs that quote ``texts``."""
    if not texts:
        return 0
    needles = list(texts) + [json.dumps(t)[1:-1] for t in texts]
    hit = [
        str(r[0])
        for r in conn.execute(
            "SELECT job_id, checkpoint::text, result::text, COALESCE(last_error, '') FROM jobs"
            " WHERE tenant_id = %s AND (checkpoint::text <> '{}' OR result::text <> '{}'"
            " OR last_error IS NOT NULL)",
            (tenant_id,),
        )
        if any(n in blob for blob in r[1:] for n in needles)
    ]
    if hit:
        conn.execute(
            "UPDATE jobs SET checkpoint = '{}'::json, result = '{}'::json, last_error = NULL"
            " WHERE job_id = ANY(%s)",
            (hit,),
        )
    return len(hit)


def _scrub_session_jobs(conn: psycopg.Connection[Any], tenant_id: str, owner: str) -> int:
    """Clear what the promotion jobs of one session owner kept: checkpoint, result, error."""
    return conn.execute(
        "UPDATE jobs SET checkpoint = '{}'::json, result = '{}'::json, last_error = NULL"
        " WHERE tenant_id = %s AND kind = 'promote_session' AND left(idempotency_key, %s) = %s"
        " AND (checkpoint::text <> '{}' OR result::text <> '{}' OR last_error IS NOT NULL)",
        (tenant_id, len(owner) + 1, owner + _SEP),
    ).rowcount


def _shrink_counters(conn: psycopg.Connection[Any], tenant_id: str, owner: str) -> None:
    """Recount what one session owner holds after part of its turns went."""
    conn.execute(
        "UPDATE sessions s SET turns = c.turns, bytes = c.bytes FROM (SELECT session_id,"
        " count(*) AS turns, COALESCE(sum(octet_length(content) + octet_length(metadata::text)),"
        " 0) AS bytes FROM session_turns WHERE tenant_id = %(t)s AND owner = %(o)s"
        " GROUP BY session_id) c WHERE s.tenant_id = %(t)s AND s.owner = %(o)s"
        " AND s.session_id = c.session_id",
        {"t": tenant_id, "o": owner},
    )
    conn.execute(
        "UPDATE session_owners SET turns = (SELECT COALESCE(sum(turns), 0) FROM sessions"
        " WHERE tenant_id = %(t)s AND owner = %(o)s), bytes = (SELECT COALESCE(sum(bytes), 0)"
        " FROM sessions WHERE tenant_id = %(t)s AND owner = %(o)s)"
        " WHERE tenant_id = %(t)s AND owner = %(o)s",
        {"t": tenant_id, "o": owner},
    )


def _database_bytes(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return 0 if row is None else int(row[0])
