"""Model-written article bodies awaiting review on PostgreSQL (a mixin of
:class:`PostgresStore`; GRAD-1, LIFE-5): the same table and answers as
:mod:`quipu.storage.sqlite.knowledge_candidates`; every statement names ``tenant_id``."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from quipu.core.knowledge import ArticleCandidate, CandidateStatus
from quipu.storage.admission import admit
from quipu.storage.knowledge_rows import (
    CANDIDATE_COLUMNS,
    candidate_params,
    status_param,
    to_candidate,
)
from quipu.storage.timecodec import to_micros

_MARKS = ", ".join(["%s"] * 16)


class CandidateTables:
    """Needs the store's ``_tx()`` (one transaction) and ``_conn()`` (autocommit)."""

    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def candidate_put(self, candidate: ArticleCandidate) -> None:
        admit(candidate)
        with self._tx() as c:
            c.execute(
                f"INSERT INTO article_candidates ({CANDIDATE_COLUMNS}) VALUES ({_MARKS})",
                candidate_params(candidate),
            )

    def candidate_get(self, tenant_id: str, candidate_id: str) -> ArticleCandidate | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {CANDIDATE_COLUMNS} FROM article_candidates"
                " WHERE tenant_id = %s AND id = %s",
                (tenant_id, candidate_id),
            ).fetchone()
        return None if row is None else to_candidate(row)

    def candidate_list(
        self, tenant_id: str, status: CandidateStatus | None, after: str | None, limit: int
    ) -> list[ArticleCandidate]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {CANDIDATE_COLUMNS} FROM article_candidates WHERE tenant_id = %s"
                " AND (%s::text IS NULL OR status = %s) AND (%s::text IS NULL OR id > %s)"
                " ORDER BY id LIMIT %s",
                (tenant_id, status_param(status), status_param(status), after, after, limit),
            ).fetchall()
        return [to_candidate(r) for r in rows]

    def candidate_judge(
        self,
        tenant_id: str,
        candidate_id: str,
        status: CandidateStatus,
        judged_by: str,
        at: datetime,
        reason: str,
    ) -> bool:
        with self._tx() as c:
            return bool(
                c.execute(
                    "UPDATE article_candidates SET status = %s, judged_by = %s, judged_at = %s,"
                    " reason = %s WHERE tenant_id = %s AND id = %s AND status = 'candidate'",
                    (status.value, judged_by, to_micros(at), reason, tenant_id, candidate_id),
                ).rowcount
            )
