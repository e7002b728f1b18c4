"""Converting between ``memory_versions`` rows and domain records, and the full-text encoding.

Full-text keys are made in Python by the same tokenizer as the SQLite backend
(:func:`quipu.retrieval.bm25.tokenize`: NFKC, case fold, stop words, Snowball stems) and stored as
a ``tsvector`` literal with positions, so both backends index and score the same terms whatever
the server's text-search configuration or locale.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
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
from quipu.core.text import fold
from quipu.retrieval.bm25 import document_tokens, indexed_keys

_LEXEME = re.compile(r"'((?:[^']|'')*)':")

#: A storage key is ``tenant number * KEY_SPAN + nextval('memory_key_seq')``.
KEY_BITS = 40
KEY_SPAN = 1 << KEY_BITS
#: tsvector limits: positions above 16383 are not representable; 256 positions per lexeme.
_MAX_POSITION = 16_383
_MAX_POSITIONS = 256

COLUMNS = (
    "key, tenant_id, scope, owner, id, version, is_current, project, text, kind, status,"
    " confidence, source, trust, tags, metadata, aliases, provenance, observed_at, valid_at,"
    " invalid_at, recorded_at, content_hash, embedding_model, relation, actor, reason, related_id"
)

#: Columns a version row is written with, in the order of :func:`to_values`.
WRITE_COLUMNS = (
    "tenant_id",
    "scope",
    "owner",
    "id",
    "version",
    "is_current",
    "project",
    "text",
    "kind",
    "status",
    "confidence",
    "source",
    "trust",
    "tags",
    "metadata",
    "aliases",
    "provenance",
    "observed_at",
    "valid_at",
    "invalid_at",
    "valid_to",
    "recorded_at",
    "content_hash",
    "embedding_key",
    "embedding_model",
    "vector",
    "terms",
    "term_count",
    "relation",
    "actor",
    "reason",
    "related_id",
)

TERM_COUNT_AT = WRITE_COLUMNS.index("term_count")
TERMS_AT = WRITE_COLUMNS.index("terms")

_CASTS = {"terms": "::tsvector", "metadata": "::json", "provenance": "::json"}


#: The :data:`WRITE_COLUMNS` values as named parameters (see :func:`write_params`).
WRITE_VALUES = ", ".join(
    f"%(c_{c})b" if c == "vector" else f"%(c_{c})s{_CASTS.get(c, '')}" for c in WRITE_COLUMNS
)


def _write_sql(guard: str) -> str:
    """One statement writing a version with its audit line, aliases and scope counters.

    Named parameters: ``c_<column>`` for every :data:`WRITE_COLUMNS` entry (see
    :func:`write_params`), ``number`` (tenant key prefix), the audit columns ``a_*``,
    ``folded`` (aliases to index), ``lexemes`` (distinct terms, for ``scope_terms``), the counter
    deltas ``d_*``, and whatever ``guard`` uses.
    Returns the new key, or no row when ``guard`` refused the write.
    """
    scope = "tenant_id = %(c_tenant_id)s AND scope = %(c_scope)s AND owner = %(c_owner)s"
    return (
        "WITH v AS ("
        f" INSERT INTO memory_versions (key, {', '.join(WRITE_COLUMNS)})"
        f" SELECT %(number)s * {KEY_SPAN} + nextval('memory_key_seq'), {WRITE_VALUES}"
        f" WHERE {guard} RETURNING key"
        "), a AS ("
        " INSERT INTO audit_log (tenant_id, at, actor_key, role, agent_id, user_id, surface,"
        " action, target_ids, reason, details) SELECT %(c_tenant_id)s, %(a_at)s, %(a_actor)s,"
        " %(a_role)s, %(a_agent)s, %(a_user)s, %(a_surface)s, %(a_action)s, %(a_targets)s,"
        " %(a_reason)s, %(a_details)s::json FROM v"
        "), al AS ("
        " INSERT INTO memory_aliases (tenant_id, scope, owner, folded, key)"
        " SELECT %(c_tenant_id)s, %(c_scope)s, %(c_owner)s, f, v.key"
        " FROM v CROSS JOIN unnest(%(folded)s::text[]) AS f ON CONFLICT DO NOTHING"
        "), tm AS ("
        " INSERT INTO scope_terms AS x (tenant_id, scope, owner, lexeme, df)"
        " SELECT %(c_tenant_id)s, %(c_scope)s, %(c_owner)s, lex, 1"
        " FROM v CROSS JOIN unnest(%(lexemes)s::text[]) AS lex WHERE (SELECT terms_tracked"
        f" FROM scope_state WHERE {scope})"
        " ON CONFLICT (tenant_id, scope, owner, lexeme) DO UPDATE SET df = x.df + 1"
        "), st AS ("
        " UPDATE scope_state SET live_count = live_count + %(d_live)s,"
        " current_count = current_count + %(d_current)s, version_count = version_count + 1,"
        " term_total = term_total + %(c_term_count)s"
        f" WHERE {scope} AND EXISTS (SELECT 1 FROM v)"
        ") SELECT key FROM v"
    )


#: Write a version unconditionally (the caller checked under the scope lock).
WRITE_SQL = _write_sql("true")

#: Write version 1 of a new family unless (for a live status) a live exact duplicate exists in
#: the partition or the scope owner is at quota (MEM-5, MEM-6). Extra parameters: ``live``,
#: ``live_statuses``, ``quota``. Runs after the scope lock, so it sees every committed write.
INSERT_SQL = _write_sql(
    "(NOT %(live)s OR (NOT EXISTS (SELECT 1 FROM memory_versions d WHERE d.tenant_id ="
    " %(c_tenant_id)s AND d.scope = %(c_scope)s AND d.owner = %(c_owner)s"
    " AND d.content_hash = %(c_content_hash)s AND d.is_current"
    " AND d.project IS NOT DISTINCT FROM %(c_project)s AND d.status = ANY(%(live_statuses)s))"
    " AND COALESCE((SELECT live_count FROM scope_state WHERE tenant_id = %(c_tenant_id)s"
    " AND scope = %(c_scope)s AND owner = %(c_owner)s), 0) < %(quota)s))"
)


def tenant_number_of(key: int) -> int:
    return key >> KEY_BITS


def utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def utc_opt(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def to_record(row: Sequence[Any]) -> MemoryVersion:
    """A row selected as :data:`COLUMNS` (the key first) into a domain record."""
    (
        _key,
        tenant_id,
        scope,
        owner,
        ident,
        version,
        is_current,
        project,
        text,
        kind,
        status,
        confidence,
        source,
        trust,
        tags,
        metadata,
        aliases,
        provenance,
        observed_at,
        valid_at,
        invalid_at,
        recorded_at,
        content_hash,
        embedding_model,
        relation,
        actor,
        reason,
        related_id,
    ) = row[:28]
    return MemoryVersion(
        id=ident,
        version=version,
        tenant_id=tenant_id,
        scope=Scope(scope),
        owner=owner,
        project=project,
        text=text,
        kind=Kind(kind),
        status=Status(status),
        confidence=confidence,
        source=Source(source),
        trust=Trust(trust),
        tags=tuple(tags),
        metadata=metadata,
        aliases=tuple(aliases),
        provenance=Provenance.from_dict(provenance),
        observed_at=utc_opt(observed_at),
        valid_at=utc(valid_at),
        invalid_at=utc_opt(invalid_at),
        recorded_at=utc(recorded_at),
        content_hash=content_hash,
        embedding_model=embedding_model,
        relation=Relation(relation),
        actor=actor,
        reason=reason,
        related_id=related_id,
        is_current=bool(is_current),
    )


def to_values(
    m: MemoryVersion,
    embedding_key: str | None,
    vector: Any,
    valid_to: datetime | None,
    context: Sequence[str] = (),
) -> tuple[Any, ...]:
    """Values in :data:`WRITE_COLUMNS` order; ``vector`` is a numpy array or None; ``context``
    the BM25 keys the version is also indexed under (its session's previous memory)."""
    terms, term_count = tsvector_literal(
        indexed_keys(document_tokens(m.text, m.aliases, m.observed_at), context)
    )
    return (
        m.tenant_id,
        m.scope.value,
        m.owner,
        m.id,
        m.version,
        m.is_current,
        m.project,
        m.text,
        m.kind.value,
        m.status.value,
        m.confidence,
        m.source.value,
        m.trust.value,
        list(m.tags),
        json.dumps(m.metadata, sort_keys=True),
        list(m.aliases),
        json.dumps(m.provenance.to_dict(), sort_keys=True),
        m.observed_at,
        m.valid_at,
        m.invalid_at,
        valid_to,
        m.recorded_at,
        m.content_hash,
        embedding_key,
        m.embedding_model,
        vector,
        terms,
        term_count,
        m.relation.value,
        m.actor,
        m.reason,
        m.related_id,
    )


def write_params(
    number: int,
    m: MemoryVersion,
    embedding_key: str | None,
    vector: Any,
    valid_to: datetime | None,
    audit: dict[str, Any],
    *,
    live_delta: int,
    current_delta: int,
    context: Sequence[str] = (),
) -> dict[str, Any]:
    """Parameters of :data:`WRITE_SQL` / :data:`INSERT_SQL` (``audit``: the ``a_*`` values)."""
    values = to_values(m, embedding_key, vector, valid_to, context)
    params = {f"c_{c}": v for c, v in zip(WRITE_COLUMNS, values, strict=True)}
    params.update(audit)
    params.update(
        number=number,
        lexemes=lexemes_of(params["c_terms"]),
        folded=[fold(a) for a in m.aliases] if m.is_current else [],
        d_live=live_delta,
        d_current=current_delta,
    )
    return params


def _quote(lexeme: str) -> str:
    if "'" in lexeme or "\\" in lexeme:
        lexeme = lexeme.replace("\\", "\\\\").replace("'", "''")
    return f"'{lexeme}'"


def tsvector_literal(tokens: Sequence[str]) -> tuple[str, int]:
    """The ``tsvector`` input text for a version's BM25 keys (lexemes with positions) and its
    length.

    A lexeme keeps at most 256 positions and positions stop at 16383 (tsvector's limits), so
    the term frequency of a very long text is capped there; the length is not.
    """
    positions: dict[str, list[str]] = {}
    for at, token in enumerate(tokens, start=1):
        seen = positions.get(token)
        if seen is None:
            positions[token] = [str(min(at, _MAX_POSITION))]
        elif len(seen) < _MAX_POSITIONS and at <= _MAX_POSITION:
            seen.append(str(at))
    return " ".join(f"{_quote(lex)}:{','.join(pos)}" for lex, pos in positions.items()), len(tokens)


def lexemes_of(tsvector: str) -> list[str]:
    """The distinct lexemes of a :func:`tsvector_literal`, in its order."""
    return [m.replace("''", "'").replace("\\\\", "\\") for m in _LEXEME.findall(tsvector)]


def tsquery_literal(lexemes: Sequence[str]) -> str:
    """An OR query over ``lexemes`` (``'a' | 'b'``), matched verbatim (no parser involved)."""
    return " | ".join(_quote(lex) for lex in lexemes)
