"""Knowledge rows as both backends store them (one column list, one codec): a version of an
article is a row of ``knowledge_versions``; times are integer microseconds (UTC), tags JSON, the
vector float32 bytes. No dialect here: each backend's module runs its own SQL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from quipu.core.knowledge import (
    ArticleCandidate,
    ArticleStatus,
    ArticleVersion,
    CandidateStatus,
    Visibility,
    title_key,
)
from quipu.storage.base import Vector
from quipu.storage.decode import loads
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros

#: The columns of ``knowledge_versions``, in the order of :func:`to_params` and
#: :func:`to_article` (the vector is read apart, :func:`to_vector`).
COLUMNS = (
    "tenant_id, id, version, owner, title, title_key, body, category, tags, project,"
    " visibility, status, source, related_id, memory_id, content_hash, recorded_at, actor,"
    " relation, reason, is_current, vector"
)
WIDTH = len(COLUMNS.split(","))


def to_params(article: ArticleVersion, vector: Vector | None) -> tuple[Any, ...]:
    """``article`` as the values of :data:`COLUMNS` (``is_current`` as given)."""
    return (
        article.tenant_id,
        article.id,
        article.version,
        article.owner,
        article.title,
        title_key(article.title),
        article.body,
        article.category,
        json.dumps(list(article.tags), ensure_ascii=False),
        article.project,
        article.visibility.value,
        article.status.value,
        article.source,
        article.related_id,
        article.memory_id,
        article.content_hash,
        to_micros(article.recorded_at),
        article.actor,
        article.relation,
        article.reason,
        article.is_current,
        None if vector is None else np.asarray(vector, dtype=np.float32).tobytes(),
    )


def to_article(row: Sequence[Any]) -> ArticleVersion:
    """A row selected as :data:`COLUMNS` into the domain record (raises on a malformed one)."""
    return ArticleVersion(
        tenant_id=str(row[0]),
        id=str(row[1]),
        version=int(row[2]),
        owner=str(row[3]),
        title=str(row[4]),
        body=str(row[6]),
        category=None if row[7] is None else str(row[7]),
        tags=tuple(str(t) for t in loads(row[8])),
        project=None if row[9] is None else str(row[9]),
        visibility=Visibility(row[10]),
        status=ArticleStatus(row[11]),
        source=str(row[12]),
        related_id=row[13],
        memory_id=row[14],
        content_hash=str(row[15]),
        recorded_at=from_micros(int(row[16])),
        actor=str(row[17]),
        relation=str(row[18]),
        reason=row[19],
        is_current=bool(row[20]),
    )


def to_vector(raw: object) -> Vector | None:
    """The stored vector, or None (none stored, or not a whole number of float32s)."""
    if raw is None:
        return None
    data = bytes(raw)  # type: ignore[call-overload]
    if not data or len(data) % 4:
        return None
    return np.frombuffer(data, dtype=np.float32).copy()


#: The columns of ``article_candidates``, in the order of :func:`candidate_params`.
CANDIDATE_COLUMNS = (
    "tenant_id, id, article_id, article_version, memory_id, owner, actor, body, model, status,"
    " proposed_at, truncated, injection_suspected, judged_by, judged_at, reason"
)


def status_param(status: CandidateStatus | None) -> str | None:
    return None if status is None else status.value


def candidate_params(a: ArticleCandidate) -> tuple[object, ...]:
    return (
        a.tenant_id,
        a.id,
        a.article_id,
        a.article_version,
        a.memory_id,
        a.owner,
        a.actor,
        a.body,
        a.embedding_model,
        a.status.value,
        to_micros(a.proposed_at),
        a.truncated,
        a.injection_suspected,
        a.judged_by,
        None if a.judged_at is None else to_micros(a.judged_at),
        a.reason,
    )


def to_candidate(r: Sequence[object]) -> ArticleCandidate:
    proposed = from_micros_opt(r[10])  # type: ignore[arg-type]
    assert proposed is not None
    return ArticleCandidate(
        tenant_id=str(r[0]),
        id=str(r[1]),
        article_id=str(r[2]),
        article_version=int(r[3]),  # type: ignore[call-overload]
        memory_id=None if r[4] is None else str(r[4]),
        owner=str(r[5]),
        actor=str(r[6]),
        body=str(r[7]),
        embedding_model=str(r[8]),
        status=CandidateStatus(str(r[9])),
        proposed_at=proposed,
        truncated=bool(r[11]),
        injection_suspected=bool(r[12]),
        judged_by=None if r[13] is None else str(r[13]),
        judged_at=from_micros_opt(r[14]),  # type: ignore[arg-type]
        reason=None if r[15] is None else str(r[15]),
    )
