"""The knowledge plane on SQLite (a mixin of :class:`SQLiteStore`; KNOW-1, RECALL-6, RECALL-9,
GRAD-1): versioned articles, the per-tenant write generation, the merged-recall ledger and its
references, usage events, and each memory's recall count and graduation stamp. Every write runs
in the store's one writer transaction (``BEGIN IMMEDIATE``), which is what makes the version
check, the title check and the first-graduation stamp hold under concurrent writers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

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
from quipu.storage.sqlite.knowledge_shown import erase_article_rows
from quipu.storage.timecodec import from_micros_opt, to_micros

_INSERT = f"INSERT INTO knowledge_versions ({COLUMNS}) VALUES ({', '.join('?' * WIDTH)})"
_LIVE = "is_current = 1 AND status <> 'erased'"
_CHUNK = 500


class KnowledgeTables:
    """Needs the store's ``_tx()`` (the writer transaction) and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    # -- articles (KNOW-1) -------------------------------------------------------------------
    def knowledge_put(self, article: ArticleVersion, vector: Vector | None) -> None:
        admit(article)
        with self._tx() as c:
            row = c.execute(
                "SELECT version, status FROM knowledge_versions"
                " WHERE tenant_id = ? AND id = ? AND is_current = 1",
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
                    f"SELECT id FROM knowledge_versions WHERE tenant_id = ? AND title_key = ?"
                    f" AND {_LIVE} AND id <> ?",
                    (article.tenant_id, title_key(article.title), article.id),
                ).fetchone()
                if taken is not None:
                    raise title_taken(article.title)
            c.execute(
                "UPDATE knowledge_versions SET is_current = 0"
                " WHERE tenant_id = ? AND id = ? AND is_current = 1",
                (article.tenant_id, article.id),
            )
            c.execute(_INSERT, to_params(article, vector))
            _bump(c, article.tenant_id)

    def knowledge_get(
        self, tenant_id: str, article_id: str, as_of: datetime | None = None
    ) -> ArticleVersion | None:
        if as_of is None:
            where, params = "is_current = 1", (tenant_id, article_id)
        else:
            where = "recorded_at <= ? ORDER BY version DESC LIMIT 1"
            params = (tenant_id, article_id, to_micros(as_of))  # type: ignore[assignment]
        rows = self._reader().execute(
            f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = ? AND id = ? AND {where}",
            params,
        )
        found = decode_rows(to_article, rows, key=lambda r: (r[1], r[2]))
        return found[0] if found else None

    def knowledge_history(self, tenant_id: str, article_id: str) -> list[ArticleVersion]:
        rows = self._reader().execute(
            f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = ? AND id = ?"
            " ORDER BY version",
            (tenant_id, article_id),
        )
        return decode_rows(to_article, rows, key=lambda r: (r[1], r[2]))

    def knowledge_live(
        self, tenant_id: str
    ) -> tuple[int, list[tuple[ArticleVersion, Vector | None]]]:
        conn = self._reader()
        conn.execute("BEGIN")
        try:
            generation = _generation(conn, tenant_id)
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = ? AND {_LIVE}"
                " ORDER BY id",
                (tenant_id,),
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        articles = decode_rows(lambda r: (to_article(r), to_vector(r[-1])), rows, lambda r: r[1])
        return generation, articles

    def knowledge_generation(self, tenant_id: str) -> int:
        return _generation(self._reader(), tenant_id)

    def knowledge_by_hash(self, tenant_id: str, text_hash: str) -> list[ArticleVersion]:
        rows = self._reader().execute(
            f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = ? AND content_hash = ?"
            f" AND {_LIVE} ORDER BY id",
            (tenant_id, text_hash),
        )
        return decode_rows(to_article, rows, key=lambda r: r[1])

    def knowledge_erase(self, tombstone: ArticleVersion) -> bool:
        """Delete every version of the article and leave ``tombstone`` (LIFE-4)."""
        admit(tombstone)
        with self._tx() as c:
            gone = c.execute(
                "DELETE FROM knowledge_versions WHERE tenant_id = ? AND id = ?",
                (tombstone.tenant_id, tombstone.id),
            ).rowcount
            if not gone:
                return False
            c.execute(_INSERT, to_params(tombstone, None))
            erase_article_rows(c, tombstone.tenant_id, tombstone.id)
            c.execute(  # an update's reason may quote the body
                "UPDATE audit_log SET reason = NULL WHERE tenant_id = ? AND reason IS NOT NULL"
                " AND action LIKE 'knowledge.%' AND EXISTS (SELECT 1 FROM json_each(target_ids)"
                " WHERE value = ?)",
                (tombstone.tenant_id, tombstone.id),
            )
            _bump(c, tombstone.tenant_id)
        return True

    def knowledge_by_memory(
        self, tenant_id: str, memory_ids: Sequence[str]
    ) -> list[ArticleVersion]:
        """The current version of every article not yet erased that any version of which was
        derived from one of ``memory_ids`` (graduation), ordered by id (LIFE-4)."""
        out: list[ArticleVersion] = []
        ids = list(dict.fromkeys(memory_ids))
        for start in range(0, len(ids), _CHUNK):
            part = ids[start : start + _CHUNK]
            rows = self._reader().execute(
                f"SELECT {COLUMNS} FROM knowledge_versions WHERE tenant_id = ? AND {_LIVE}"
                " AND id IN (SELECT id FROM knowledge_versions WHERE tenant_id = ?"
                f" AND memory_id IN ({','.join('?' * len(part))}))",
                (tenant_id, tenant_id, *part),
            )
            out += decode_rows(to_article, rows, key=lambda r: r[1])
        return sorted({a.id: a for a in out}.values(), key=lambda a: a.id)

    # -- the merged-recall ledger (RECALL-9) -------------------------------------------------
    def recall_put(self, ledger: RecallLedger) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO recall_ledger (tenant_id, recall_id, subject, items, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    ledger.tenant_id,
                    ledger.recall_id,
                    ledger.subject,
                    json.dumps(list(ledger.items)),
                    to_micros(ledger.at),
                ),
            )

    def recall_get(self, tenant_id: str, recall_id: str) -> RecallLedger | None:
        row = (
            self._reader()
            .execute(
                "SELECT subject, items, created_at FROM recall_ledger"
                " WHERE tenant_id = ? AND recall_id = ?",
                (tenant_id, recall_id),
            )
            .fetchone()
        )
        if row is None:
            return None
        items = tuple(str(i) for i in loads(row[1]))
        return RecallLedger(tenant_id, recall_id, str(row[0]), items, _at(row[2]))

    def recall_reference(
        self, tenant_id: str, recall_id: str, subject: str, ids: Sequence[str], at: datetime
    ) -> int:
        with self._tx() as c:
            before = c.total_changes
            c.executemany(
                "INSERT OR IGNORE INTO recall_references (tenant_id, recall_id, item_id, subject,"
                " at) VALUES (?, ?, ?, ?, ?)",
                [(tenant_id, recall_id, i, subject, to_micros(at)) for i in ids],
            )
            return c.total_changes - before

    def recall_references(self, tenant_id: str, recall_id: str) -> list[str]:
        rows = self._reader().execute(
            "SELECT item_id FROM recall_references WHERE tenant_id = ? AND recall_id = ?"
            " ORDER BY item_id",
            (tenant_id, recall_id),
        )
        return [str(r[0]) for r in rows]

    # -- usage and graduation (RECALL-6, GRAD-1) ---------------------------------------------
    def usage_record(self, events: Sequence[UsageEvent]) -> None:
        with self._tx() as c:
            c.executemany(
                "INSERT OR IGNORE INTO usage_events (tenant_id, event_id, memory_id, recall_id,"
                " score, relevant, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
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
        rows = self._reader().execute(
            "SELECT event_id, recall_id, score, relevant, at FROM usage_events"
            " WHERE tenant_id = ? AND memory_id = ? ORDER BY at, event_id",
            (tenant_id, memory_id),
        )
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
                    " VALUES (?, ?, 1, ?) ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                    " recall_count = recall_count + 1, last_bumped_at = excluded.last_bumped_at"
                    " WHERE last_bumped_at IS NULL OR last_bumped_at <= ?",
                    (tenant_id, memory_id, now, cut),
                ).rowcount
                if changed:
                    bumped.append(memory_id)
        return bumped

    def memory_usage(self, tenant_id: str, memory_id: str) -> MemoryUsage | None:
        row = (
            self._reader()
            .execute(
                "SELECT recall_count, last_bumped_at, graduated_at, article_id, re_scoped"
                " FROM memory_usage WHERE tenant_id = ? AND memory_id = ?",
                (tenant_id, memory_id),
            )
            .fetchone()
        )
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
        rows = self._reader().execute(
            "SELECT DISTINCT tenant_id FROM memory_usage WHERE graduated_at IS NULL"
            " AND recall_count >= ? ORDER BY tenant_id LIMIT ?",
            (threshold, limit),
        )
        return [str(r[0]) for r in rows]

    def hot_memories(self, tenant_id: str, threshold: int, limit: int) -> list[str]:
        rows = self._reader().execute(
            "SELECT memory_id FROM memory_usage WHERE tenant_id = ? AND graduated_at IS NULL"
            " AND recall_count >= ? ORDER BY recall_count DESC, memory_id LIMIT ?",
            (tenant_id, threshold, limit),
        )
        return [str(r[0]) for r in rows]

    def mark_graduated(
        self, tenant_id: str, memory_id: str, article_id: str, at: datetime, re_scoped: bool
    ) -> bool:
        with self._tx() as c:
            changed = c.execute(
                "INSERT INTO memory_usage (tenant_id, memory_id, recall_count, graduated_at,"
                " article_id, re_scoped) VALUES (?, ?, 0, ?, ?, ?)"
                " ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                " graduated_at = excluded.graduated_at, article_id = excluded.article_id,"
                " re_scoped = excluded.re_scoped WHERE graduated_at IS NULL",
                (tenant_id, memory_id, to_micros(at), article_id, re_scoped),
            ).rowcount
        return bool(changed)

    def usage_erase(self, tenant_id: str, memory_ids: Sequence[str]) -> dict[str, int]:
        """Delete the usage events and the recall counter and graduation stamp of each of
        ``memory_ids`` (LIFE-4); rows deleted per table."""
        counts = {"usage_events": 0, "memory_usage": 0}
        ids = list(dict.fromkeys(memory_ids))
        with self._tx() as c:
            for start in range(0, len(ids), _CHUNK):
                part = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                for table in counts:
                    counts[table] += c.execute(
                        f"DELETE FROM {table} WHERE tenant_id = ? AND memory_id IN ({marks})",
                        (tenant_id, *part),
                    ).rowcount
        return counts


def title_taken(title: str) -> Conflict:
    return Conflict(
        "another article of this tenant has that title (titles are unique, case-folded)",
        code="title_taken",
        details={"title": title},
    )


def _bump(c: sqlite3.Connection, tenant_id: str) -> None:
    c.execute(
        "INSERT INTO knowledge_state (tenant_id, generation) VALUES (?, 1)"
        " ON CONFLICT (tenant_id) DO UPDATE SET generation = generation + 1",
        (tenant_id,),
    )


def _generation(conn: sqlite3.Connection, tenant_id: str) -> int:
    row = conn.execute(
        "SELECT generation FROM knowledge_state WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _at(value: int) -> datetime:
    found = from_micros_opt(value)
    assert found is not None
    return found
