"""Converting between ``memory_versions`` rows and domain records."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from quipu.core.records import (
    Kind,
    MemoryVersion,
    Provenance,
    Relation,
    Scope,
    Source,
    Status,
    Trust,
)
from quipu.storage.decode import loads
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros, to_micros_opt

log = logging.getLogger("quipu.storage")

COLUMNS = (
    "key, tenant_id, scope, owner, id, version, is_current, project, text, kind, status,"
    " confidence, source, trust, tags, metadata, aliases, provenance, observed_at, valid_at,"
    " invalid_at, recorded_at, content_hash, embedding_model, relation, actor, reason, related_id"
)


def to_record(row: sqlite3.Row) -> MemoryVersion:
    return MemoryVersion(
        id=row["id"],
        version=row["version"],
        tenant_id=row["tenant_id"],
        scope=Scope(row["scope"]),
        owner=row["owner"],
        project=row["project"],
        text=row["text"],
        kind=Kind(row["kind"]),
        status=Status(row["status"]),
        confidence=row["confidence"],
        source=Source(row["source"]),
        trust=Trust(row["trust"]),
        tags=tuple(loads(row["tags"])),
        metadata=loads(row["metadata"]),
        aliases=tuple(loads(row["aliases"])),
        provenance=Provenance.from_dict(loads(row["provenance"])),
        observed_at=from_micros_opt(row["observed_at"]),
        valid_at=from_micros(row["valid_at"]),
        invalid_at=from_micros_opt(row["invalid_at"]),
        recorded_at=from_micros(row["recorded_at"]),
        content_hash=row["content_hash"],
        embedding_model=row["embedding_model"],
        relation=Relation(row["relation"]),
        actor=row["actor"],
        reason=row["reason"],
        related_id=row["related_id"],
        is_current=bool(row["is_current"]),
    )


def to_params(
    m: MemoryVersion, embedding_key: str | None, vector: bytes | None, terms: Sequence[str]
) -> dict[str, Any]:
    """Column values of a version; ``terms`` are its BM25 keys (its own and its context's)."""
    return {
        "vector": vector,
        "terms": " ".join(terms),
        "tenant_id": m.tenant_id,
        "scope": m.scope.value,
        "owner": m.owner,
        "id": m.id,
        "version": m.version,
        "is_current": 1 if m.is_current else 0,
        "project": m.project,
        "text": m.text,
        "kind": m.kind.value,
        "status": m.status.value,
        "confidence": m.confidence,
        "source": m.source.value,
        "trust": m.trust.value,
        "tags": json.dumps(list(m.tags)),
        "metadata": json.dumps(m.metadata, sort_keys=True),
        "aliases": json.dumps(list(m.aliases)),
        "provenance": json.dumps(m.provenance.to_dict(), sort_keys=True),
        "observed_at": to_micros_opt(m.observed_at),
        "valid_at": to_micros(m.valid_at),
        "invalid_at": to_micros_opt(m.invalid_at),
        "valid_to": to_micros_opt(m.invalid_at),
        "recorded_at": to_micros(m.recorded_at),
        "content_hash": m.content_hash,
        "embedding_key": embedding_key,
        "embedding_model": m.embedding_model,
        "relation": m.relation.value,
        "actor": m.actor,
        "reason": m.reason,
        "related_id": m.related_id,
    }


INSERT_SQL = (
    "INSERT INTO memory_versions (tenant_id, scope, owner, id, version, is_current, project, text,"
    " kind, status, confidence, source, trust, tags, metadata, aliases, provenance, observed_at,"
    " valid_at, invalid_at, valid_to, recorded_at, content_hash, embedding_key, embedding_model,"
    " relation, actor, reason, related_id, vector, terms) VALUES (:tenant_id, :scope, :owner,"
    " :id, :version, :is_current,"
    " :project, :text, :kind, :status, :confidence, :source, :trust, :tags, :metadata, :aliases,"
    " :provenance, :observed_at, :valid_at, :invalid_at, :valid_to, :recorded_at, :content_hash,"
    " :embedding_key, :embedding_model, :relation, :actor, :reason, :related_id, :vector, :terms)"
)


def fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    """``conn.execute(sql, params).fetchall()``, read again with invalid UTF-8 replaced by U+FFFD
    when a stored text is not UTF-8 (written by another tool: SQLite does not check), so one
    such row never fails a read of its neighbours (issue 20)."""
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
    log.warning("a stored row holds text that is not UTF-8; read with U+FFFD in its place")
    previous = conn.text_factory
    conn.text_factory = lenient_text
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.text_factory = previous


def lenient_text(raw: bytes) -> str:
    """A TEXT value as ``str``, invalid UTF-8 replaced by U+FFFD."""
    return str(raw, "utf-8", "replace")
