"""Knowledge rows as both backends store them (one column list, one codec): a version of an
article is a row of ``knowledge_versions``; times are integer microseconds (UTC), tags JSON, the
vector float32 bytes. No dialect here: each backend's module runs its own SQL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from quipu.core.knowledge import ArticleStatus, ArticleVersion, Visibility, title_key
from quipu.storage.base import Vector
from quipu.storage.decode import loads
from quipu.storage.timecodec import from_micros, to_micros

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
