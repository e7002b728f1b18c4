"""The knowledge plane on PostgreSQL (a mixin of :class:`PostgresStore`; KNOW-1, RECALL-6,
RECALL-9, GRAD-1): the same tables and answers as :mod:`quipu.storage.sqlite.knowledge`. A
version write locks the article's current row (``FOR UPDATE``), so two writers of one article
take turns and the second sees ``version_conflict``; the partial unique index on the folded
title decides a race of two creates; the first-graduation stamp is one conditional upsert.
Every statement names ``tenant_id``, so Citus routes it to the tenant's worker."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from quipu.core.knowledge import (
    ArticleStatus,
    ArticleVersion,
    MemoryUsage,
    RecallLedger,
    UsageEvent,
    title_key,
)
from quipu.errors import Conflict
from quipu.storage.admission import admit
from quipu.storage.base import Vector
from quipu.storage.decode import decode_rows, loads
from quipu.storage.knowledge_rows import COLUMNS, WIDTH, to_article, to_params, to_vector
from quipu.storage.postgres.knowledge_shown import erase_article_rows
from quipu.storage.timecodec import from_micros_opt, to_micros

_INSERT = f"INSERT INTO knowledge_versions ({COLUMNS}) VALUES ({', '.join(['%s'] * WIDTH)})"
_LIVE = "is_current AND status <> 'erased'"


class KnowledgeTables:
    """Needs the store's ``_tx()`` (one transaction) and ``_conn()`` (autocommit)."""

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    # -- articles (KNOW-1) -------------------------------------------------------------------
    def knowledge_put(self, article: ArticleVersion, vector: Vector | None) -> None:
        admit(article)
        with self._tx() as c:
            row = c.execute(
                "SELECT version, status FROM knowledge_versions"
                " WHERE tenant_id = %s AND id = %s AND is_current FOR UPDATE",
                (article.tenant_id, article.id),
            ).fetchone()
            current = 0 if row is None else int(row[0])
            if current != article.version - 1 or (row is not None and row[1] == "erased"):
                raise Conflict(
                    f"article {article.id} is at version {current}, not {article.version - 1}",
                    code="version_conflict",
                    details={"id": article.id, "current_version": current},
                )
            if article.status is not ArticleStatus.ERASED:
                taken = c.execute(
                    f"SELECT id FROM knowledge_versions WHERE tenant_id = %s AND title_key = %s"
                    f" AND {_LIVE} AND id <> %s",
                    (article.tenant_id, title_key(article.title), article.id),
                ).fetchone()
                if taken is not None:
                    raise title_taken(article.title)
            c.execute(
                "UPDATE knowledge_versions SET is_current = false"
                " WHERE tenant_id = %s AND id = %s AND is_current",
                (article.tenant_id, article.id),
            )
            try:
                with c.transaction():
                    c.execute(_INSERT, to_params(article, vector))
            except pg_errors.UniqueViolation as exc:
                if exc.diag.constraint_name == "knowledge_live_title":
                    raise title_taken(article.title) from None
                raise Conflict(
                    f"article {article.id} changed meanwhile", code="version_conflict"
                ) from None
            _bump(c, article.tenant_id)

    def knowledge_get(
        self, tenant_id: str, article_id: str, as_of: datetime | None = None
    ) -> ArticleVersion | None:
        if as_of is None:
            where, params = "is_current", (tenant_id, article_id)
        else:
            where = "recorded_at <= %s ORDER BY version DESC LIMIT 1"
            params = (tenant_id, article_id, to_micros(as_of))  # type: ignore[assignment]
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = %s AND id = %s"
                f" AND {where}",
                params,
            ).fetchall()
        found = decode_rows(to_article, rows, key=lambda r: (r[1], r[2]))
        return found[0] if found else None

    def knowledge_history(self, tenant_id: str, article_id: str) -> list[ArticleVersion]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = %s AND id = %s"
                " ORDER BY version",
                (tenant_id, article_id),
            ).fetchall()
        return decode_rows(to_article, rows, key=lambda r: (r[1], r[2]))

    def knowledge_live(
        self, tenant_id: str
    ) -> tuple[int, list[tuple[ArticleVersion, Vector | None]]]:
        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            generation = _generation(conn, tenant_id)
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = %s AND {_LIVE}"
                " ORDER BY id",
                (tenant_id,),
            ).fetchall()
        articles = decode_rows(lambda r: (to_article(r), to_vector(r[-1])), rows, lambda r: r[1])
        return generation, articles

    def knowledge_generation(self, tenant_id: str) -> int:
        with self._conn() as conn:
            return _generation(conn, tenant_id)

    def knowledge_by_hash(self, tenant_id: str, text_hash: str) -> list[ArticleVersion]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = %s"
                f" AND content_hash = %s AND {_LIVE} ORDER BY id",
                (tenant_id, text_hash),
            ).fetchall()
        return decode_rows(to_article, rows, key=lambda r: r[1])

    def knowledge_erase(self, tombstone: ArticleVersion) -> bool:
        """Delete every version of the article and leave ``tombstone`` (LIFE-4)."""
        admit(tombstone)
        with self._tx() as c:
            gone = c.execute(
                "DELETE FROM knowledge_versions WHERE tenant_id = %s AND id = %s",
                (tombstone.tenant_id, tombstone.id),
            ).rowcount
            if not gone:
                return False
            c.execute(_INSERT, to_params(tombstone, None))
            erase_article_rows(c, tombstone.tenant_id, tombstone.id)
            c.execute(  # an update's reason may quote the body
                "UPDATE audit_log SET reason = NULL WHERE tenant_id = %s AND reason IS NOT NULL"
                " AND action LIKE 'knowledge.%%' AND target_ids && %s::text[]",
                (tombstone.tenant_id, [tombstone.id]),
            )
            _bump(c, tombstone.tenant_id)
        return True

    def knowledge_by_memory(
        self, tenant_id: str, memory_ids: Sequence[str]
    ) -> list[ArticleVersion]:
        """The current version of every article not yet erased that any version of which was
        derived from one of ``memory_ids`` (graduation), ordered by id (LIFE-4)."""
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = %s AND {_LIVE}"
                " AND id IN (SELECT id FROM knowledge_versions WHERE tenant_id = %s"
                " AND memory_id = ANY(%s::text[])) ORDER BY id",
                (tenant_id, tenant_id, list(dict.fromkeys(memory_ids))),
            ).fetchall()
        return decode_rows(to_article, rows, key=lambda r: r[1])

    # -- the merged-recall ledger (RECALL-9) -------------------------------------------------
    def recall_put(self, ledger: RecallLedger) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO recall_ledger (tenant_id, recall_id, subject, items, created_at)"
                " VALUES (%s, %s, %s, %s, %s)",
                (
                    ledger.tenant_id,
                    ledger.recall_id,
                    ledger.subject,
                    json.dumps(list(ledger.items)),
                    to_micros(ledger.at),
                ),
            )

    def recall_get(self, tenant_id: str, recall_id: str) -> RecallLedger | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT subject, items, created_at FROM recall_ledger"
                " WHERE tenant_id = %s AND recall_id = %s",
                (tenant_id, recall_id),
            ).fetchone()
        if row is None:
            return None
        items = tuple(str(i) for i in loads(row[1]))
        return RecallLedger(tenant_id, recall_id, str(row[0]), items, _at(row[2]))

    def recall_reference(
        self, tenant_id: str, recall_id: str, subject: str, ids: Sequence[str], at: datetime
    ) -> int:
        added = 0
        with self._tx() as c:
            for item in dict.fromkeys(ids):
                added += c.execute(
                    "INSERT INTO recall_references (tenant_id, recall_id, item_id, subject, at)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (tenant_id, recall_id, item, subject, to_micros(at)),
                ).rowcount
        return added

    def recall_references(self, tenant_id: str, recall_id: str) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT item_id FROM recall_references WHERE tenant_id = %s AND recall_id = %s"
                " ORDER BY item_id",
                (tenant_id, recall_id),
            ).fetchall()
        return [str(r[0]) for r in rows]

    # -- usage and graduation (RECALL-6, GRAD-1) ---------------------------------------------
    def usage_record(self, events: Sequence[UsageEvent]) -> None:
        with self._tx() as c, c.cursor() as cur:
            cur.executemany(
                "INSERT INTO usage_events (tenant_id, event_id, memory_id, recall_id,"
                " score, relevant, at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                [
                    (
                        e.tenant_id,
                        e.event_id,
                        e.memory_id,
                        e.recall_id,
                        e.score,
                        e.relevant,
                        to_micros(e.at),
                    )
                    for e in events
                ],
            )

    def usage_events(self, tenant_id: str, memory_id: str) -> list[UsageEvent]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT event_id, recall_id, score, relevant, at FROM usage_events"
                " WHERE tenant_id = %s AND memory_id = %s ORDER BY at, event_id",
                (tenant_id, memory_id),
            ).fetchall()
        return [
            UsageEvent(
                tenant_id, str(r[0]), memory_id, str(r[1]), float(r[2]), bool(r[3]), _at(r[4])
            )
            for r in rows
        ]

    def usage_bump(
        self, tenant_id: str, memory_ids: Sequence[str], at: datetime, cooldown: timedelta
    ) -> list[str]:
        now, cut = to_micros(at), to_micros(at - cooldown)
        bumped: list[str] = []
        with self._tx() as c:
            for memory_id in dict.fromkeys(memory_ids):
                changed = c.execute(
                    "INSERT INTO memory_usage (tenant_id, memory_id, recall_count, last_bumped_at)"
                    " VALUES (%s, %s, 1, %s) ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                    " recall_count = memory_usage.recall_count + 1,"
                    " last_bumped_at = excluded.last_bumped_at"
                    " WHERE memory_usage.last_bumped_at IS NULL"
                    " OR memory_usage.last_bumped_at <= %s",
                    (tenant_id, memory_id, now, cut),
                ).rowcount
                if changed:
                    bumped.append(memory_id)
        return bumped

    def memory_usage(self, tenant_id: str, memory_id: str) -> MemoryUsage | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT recall_count, last_bumped_at, graduated_at, article_id, re_scoped"
                " FROM memory_usage WHERE tenant_id = %s AND memory_id = %s",
                (tenant_id, memory_id),
            ).fetchone()
        if row is None:
            return None
        return MemoryUsage(
            tenant_id,
            memory_id,
            int(row[0]),
            from_micros_opt(row[1]),
            from_micros_opt(row[2]),
            row[3],
            bool(row[4]),
        )

    def hot_tenants(self, threshold: int, limit: int) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT DISTINCT tenant_id FROM memory_usage WHERE graduated_at IS NULL"
                " AND recall_count >= %s ORDER BY tenant_id LIMIT %s",
                (threshold, limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def hot_memories(self, tenant_id: str, threshold: int, limit: int) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT memory_id FROM memory_usage WHERE tenant_id = %s"
                " AND graduated_at IS NULL AND recall_count >= %s"
                " ORDER BY recall_count DESC, memory_id LIMIT %s",
                (tenant_id, threshold, limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def mark_graduated(
        self, tenant_id: str, memory_id: str, article_id: str, at: datetime, re_scoped: bool
    ) -> bool:
        with self._tx() as c:
            changed = c.execute(
                "INSERT INTO memory_usage (tenant_id, memory_id, recall_count, graduated_at,"
                " article_id, re_scoped) VALUES (%s, %s, 0, %s, %s, %s)"
                " ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                " graduated_at = excluded.graduated_at, article_id = excluded.article_id,"
                " re_scoped = excluded.re_scoped WHERE memory_usage.graduated_at IS NULL",
                (tenant_id, memory_id, to_micros(at), article_id, re_scoped),
            ).rowcount
        return bool(changed)

    def usage_erase(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, int]:
        """Delete the usage events and the recall counter and graduation stamp of each of
        ``memory_ids`` (LIFE-4); rows deleted per table."""
        counts = {"usage_events": 0, "memory_usage": 0}
        ids = list(dict.fromkeys(memory_ids))
        with self._tx() as c:
            for table in counts:
                counts[table] = c.execute(
                    f"DELETE FROM {table} WHERE tenant_id = %s AND memory_id = ANY(%s::text[])",
                    (tenant_id, ids),
                ).rowcount
        return counts


def title_taken(title: str) -> Conflict:
    return Conflict(
        "another article of this tenant has that title (titles are unique, case-folded)",
        code="title_taken",
        details={"title": title},
    )


def _bump(c: psycopg.Connection[Any], tenant_id: str) -> None:
    c.execute(
        "INSERT INTO knowledge_state (tenant_id, generation) VALUES (%s, 1)"
        " ON CONFLICT (tenant_id) DO UPDATE SET generation = knowledge_state.generation + 1",
        (tenant_id,),
    )


def _generation(conn: psycopg.Connection[Any], tenant_id: str) -> int:
    row = conn.execute(
        "SELECT generation FROM knowledge_state WHERE tenant_id = %s", (tenant_id,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _at(value: int) -> datetime:
    found = from_micros_opt(value)
    assert found is not None
    return found
