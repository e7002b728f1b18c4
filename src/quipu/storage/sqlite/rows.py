"""Converting between ``memory_versions`` rows and domain records."""

from __future__ import annotations

import json
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
from quipu.storage.timecodec import from_micros, from_micros_opt, to_micros, to_micros_opt

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
        tags=tuple(json.loads(row["tags"])),
        metadata=json.loads(row["metadata"]),
        aliases=tuple(json.loads(row["aliases"])),
        provenance=Provenance.from_dict(json.loads(row["provenance"])),
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
