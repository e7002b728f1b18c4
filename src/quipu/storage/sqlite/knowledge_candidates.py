"""Model-written article bodies awaiting review on SQLite (a mixin of :class:`SQLiteStore`;
GRAD-1, LIFE-5). Same table and answers as the server store's module of this name."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from datetime import datetime

from quipu.core.knowledge import ArticleCandidate, CandidateStatus
from quipu.storage.admission import admit
from quipu.storage.knowledge_rows import (
    CANDIDATE_COLUMNS,
    candidate_params,
    status_param,
    to_candidate,
)
from quipu.storage.timecodec import to_micros

_MARKS = ", ".join("?" * 16)


class CandidateTables:
    """Needs the store's ``_tx()`` (the writer transaction) and ``_reader()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    # -- model-written bodies awaiting review (GRAD-1, LIFE-5) -------------------------------
    def candidate_put(self, candidate: ArticleCandidate) -> None:
        admit(candidate)
        with self._tx() as c:
            c.execute(
                f"INSERT INTO article_candidates ({CANDIDATE_COLUMNS}) VALUES ({_MARKS})",
                candidate_params(candidate),
            )

    def candidate_get(self, tenant_id: str, candidate_id: str) -> ArticleCandidate | None:
        row = (
            self._reader()
            .execute(
                f"SELECT {CANDIDATE_COLUMNS} FROM article_candidates"
                " WHERE tenant_id = ? AND id = ?",
                (tenant_id, candidate_id),
            )
            .fetchone()
        )
        return None if row is None else to_candidate(row)

    def candidate_list(
        self, tenant_id: str, status: CandidateStatus | None, after: str | None, limit: int
    ) -> list[ArticleCandidate]:
        rows = self._reader().execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM article_candidates WHERE tenant_id = ?"
            " AND (? IS NULL OR status = ?) AND (? IS NULL OR id > ?) ORDER BY id LIMIT ?",
            (tenant_id, status_param(status), status_param(status), after, after, limit),
        )
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
                    "UPDATE article_candidates SET status = ?, judged_by = ?, judged_at = ?,"
                    " reason = ? WHERE tenant_id = ? AND id = ? AND status = 'candidate'",
                    (status.value, judged_by, to_micros(at), reason, tenant_id, candidate_id),
                ).rowcount
            )
