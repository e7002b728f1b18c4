"""The articles merged recall showed each session, on SQLite (a mixin of :class:`SQLiteStore`;
RECALL-9 diversity): durable, so every worker and process over the file sees them. Same table
and answers as the server store's module of this name."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime

from quipu.storage.timecodec import to_micros

#: Tenants whose expired shown rows one prune pass deletes.
_EXPIRE_TENANTS = 500


class ShownTables:
    """Needs the store's ``_tx()`` (the writer transaction) and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    # -- articles shown per session (RECALL-9) -----------------------------------------------
    def shown_add(
        self,
        tenant_id: str,
        subject: str,
        session_id: str,
        user_id: str | None,
        article_ids: Sequence[str],
        at: datetime,
    ) -> None:
        when = to_micros(at)
        with self._tx() as c:
            c.executemany(
                "INSERT INTO knowledge_shown (tenant_id, subject, session_id, article_id,"
                " user_id, shown_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, subject, session_id, article_id) DO UPDATE SET"
                " shown_at = excluded.shown_at, user_id = excluded.user_id",
                [(tenant_id, subject, session_id, a, user_id, when) for a in article_ids],
            )

    def shown_get(
        self, tenant_id: str, subject: str, session_id: str, since: datetime, limit: int
    ) -> frozenset[str]:
        rows = self._reader().execute(
            "SELECT article_id FROM knowledge_shown WHERE tenant_id = ? AND subject = ?"
            " AND session_id = ? AND shown_at > ? ORDER BY shown_at DESC, article_id LIMIT ?",
            (tenant_id, subject, session_id, to_micros(since), limit),
        )
        return frozenset(str(r[0]) for r in rows)

    def shown_expire(self, before: datetime) -> int:
        cut = to_micros(before)
        tenants = [
            str(r[0])
            for r in self._reader().execute(
                "SELECT DISTINCT tenant_id FROM knowledge_shown WHERE shown_at <= ? LIMIT ?",
                (cut, _EXPIRE_TENANTS),
            )
        ]
        gone = 0
        for tenant in tenants:
            with self._tx() as c:
                gone += c.execute(
                    "DELETE FROM knowledge_shown WHERE tenant_id = ? AND shown_at <= ?",
                    (tenant, cut),
                ).rowcount
        return gone

    def shown_erase_subject(self, tenant_id: str, user_id: str) -> int:
        with self._tx() as c:
            return int(
                c.execute(
                    "DELETE FROM knowledge_shown WHERE tenant_id = ?"
                    " AND (user_id = ? OR subject = ?)",
                    (tenant_id, user_id, user_id),
                ).rowcount
            )


def erase_article_rows(c: sqlite3.Connection, tenant_id: str, article_id: str) -> None:
    """An article's erase reaches what was derived from it (LIFE-4): the sessions it was shown
    to and the bodies a model wrote for it."""
    for table in ("knowledge_shown", "article_candidates"):
        c.execute(
            f"DELETE FROM {table} WHERE tenant_id = ? AND article_id = ?", (tenant_id, article_id)
        )
