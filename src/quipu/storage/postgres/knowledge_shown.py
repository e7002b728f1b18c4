"""The articles merged recall showed each session, on PostgreSQL (a mixin of
:class:`PostgresStore`; RECALL-9 diversity): the same table and answers as
:mod:`quipu.storage.sqlite.knowledge_shown`. Every statement but the expiry's tenant scan names
``tenant_id``, so Citus routes it to the tenant's worker."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.storage.timecodec import to_micros

#: Tenants whose expired shown rows one prune pass deletes.
_EXPIRE_TENANTS = 500


class ShownTables:
    """Needs the store's ``_tx()`` (one transaction) and ``_conn()`` (autocommit)."""

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

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
        with self._tx() as c, c.cursor() as cur:
            cur.executemany(
                "INSERT INTO knowledge_shown (tenant_id, subject, session_id, article_id,"
                " user_id, shown_at) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (tenant_id, subject, session_id, article_id) DO UPDATE SET"
                " shown_at = excluded.shown_at, user_id = excluded.user_id",
                [
                    (tenant_id, subject, session_id, a, user_id, when)
                    for a in dict.fromkeys(article_ids)
                ],
            )

    def shown_get(
        self, tenant_id: str, subject: str, session_id: str, since: datetime, limit: int
    ) -> frozenset[str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT article_id FROM knowledge_shown WHERE tenant_id = %s AND subject = %s"
                " AND session_id = %s AND shown_at > %s ORDER BY shown_at DESC, article_id"
                " LIMIT %s",
                (tenant_id, subject, session_id, to_micros(since), limit),
            ).fetchall()
        return frozenset(str(r[0]) for r in rows)

    def shown_expire(self, before: datetime) -> int:
        cut = to_micros(before)
        with self._conn() as conn:
            tenants = [
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT tenant_id FROM knowledge_shown WHERE shown_at <= %s LIMIT %s",
                    (cut, _EXPIRE_TENANTS),
                ).fetchall()
            ]
        gone = 0
        for tenant in tenants:
            with self._tx() as c:
                gone += c.execute(
                    "DELETE FROM knowledge_shown WHERE tenant_id = %s AND shown_at <= %s",
                    (tenant, cut),
                ).rowcount
        return gone

    def shown_erase_subject(self, tenant_id: str, user_id: str) -> int:
        with self._tx() as c:
            return int(
                c.execute(
                    "DELETE FROM knowledge_shown WHERE tenant_id = %s"
                    " AND (user_id = %s OR subject = %s)",
                    (tenant_id, user_id, user_id),
                ).rowcount
            )


def erase_article_rows(c: psycopg.Connection[Any], tenant_id: str, article_id: str) -> None:
    """An article's erase reaches what was derived from it (LIFE-4): the sessions it was shown
    to and the bodies a model wrote for it."""
    for table in ("knowledge_shown", "article_candidates"):
        c.execute(
            f"DELETE FROM {table} WHERE tenant_id = %s AND article_id = %s",
            (tenant_id, article_id),
        )
