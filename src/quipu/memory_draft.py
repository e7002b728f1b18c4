"""A new memory's first version, built from a caller's raw fields: the one place the
validation, rate-limit admission and screening of a new memory live (debt D4).

:meth:`~quipu.memories.MemoryService.remember` drafts one memory; :mod:`quipu.memory_batch`
drafts each row of ``remember_many`` and of a promotion with the same function, so the rules
(MEM-5 bounds, SCOPE-6 projects, LIFE-5 first statuses, SAFE-1 secrets, SAFE-2 injections) cannot
drift between the single and the bulk write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from quipu.core import validate
from quipu.core.limits import Limits
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Principal,
    Provenance,
    Relation,
    ScopeRef,
    Source,
    Status,
    Trust,
    TurnRef,
)
from quipu.core.text import content_hash
from quipu.corroboration import UNVERIFIED_SOURCES
from quipu.errors import InvalidInput
from quipu.guard import Guard

#: Statuses a write may start in: ``candidate`` is a proposal awaiting review (LIFE-5).
FIRST_STATUSES = frozenset({Status.ACTIVE, Status.CANDIDATE})

#: What a 422 ``text_too_long`` tells an agent holding a pasted trace, file or transcript
#: (issue 31): the documents plane keeps it verbatim and searchable by chunk.
LONG_TEXT = (
    "keep a long text as a document instead (MCP document_add, POST /v1/documents, "
    "Quipu.documents.add: up to 1,000,000 characters, kept verbatim and searched by chunk)"
)


@dataclass(frozen=True)
class MemoryDraft:
    """A new memory's fields as a caller gave them (unchecked: :func:`draft` checks them)."""

    text: object
    kind: object = "fact"
    tags: object = None
    metadata: object = None
    aliases: object = None
    project: object = None
    confidence: object = 1.0
    source: object = "explicit"
    observed_at: object = None
    valid_at: object = None
    invalid_at: object = None
    session_id: object = None
    run_id: object = None
    model: object = None
    prompt_version: object = None
    quote: object = None
    quote_start: object = None
    quote_end: object = None
    status: object = None
    turn: TurnRef | None = None


def draft(
    guard: Guard,
    limits: Limits,
    now: datetime,
    principal: Principal,
    ref: ScopeRef,
    item: MemoryDraft,
    *,
    embedding_model: str | None = None,
) -> MemoryVersion:
    """``item``'s first version in ``ref``: every field validated, the write admitted (rate
    limit), screened for secrets in every field (SAFE-1, raises) and, when a free-text field
    looks like a prompt injection, stored ``quarantined`` (SAFE-2). The caller has resolved and
    authorised ``ref``. ``embedding_model`` names the model the caller will embed it with, so
    the version the store admits is the very object screened here (one walk, not two); a caller
    whose embedding then fails clears it."""
    lim = limits
    body = validate.text(item.text, max_bytes=lim.max_text_bytes, instead=LONG_TEXT)
    guard.admit_write(principal)
    source = validate.enum(Source, item.source, field="source")
    tags = validate.labels(item.tags, field="tags", max_count=lim.max_tags)
    aliases = validate.labels(item.aliases, field="aliases", max_count=lim.max_aliases)
    meta = validate.metadata(item.metadata, max_bytes=lim.max_metadata_bytes)
    valid = validate.instant(item.valid_at, field="valid_at") or now
    invalid = validate.instant(item.invalid_at, field="invalid_at")
    if invalid is not None and invalid <= valid:
        raise InvalidInput("invalid_at must be later than valid_at", code="invalid_time")
    quote = (
        None
        if item.quote is None
        else validate.text(item.quote, max_bytes=lim.max_text_bytes, field="quote")
    )
    start, end = validate.quote_span(quote, item.quote_start, item.quote_end)
    first = (
        Status.ACTIVE if item.status is None else validate.enum(Status, item.status, field="status")
    )
    if first not in FIRST_STATUSES:
        raise InvalidInput(
            "a memory starts active or as a candidate for review",
            code="invalid_status",
            details={"field": "status", "allowed": sorted(s.value for s in FIRST_STATUSES)},
        )
    project = guard.project(principal, item.project)
    provenance = Provenance(
        surface=principal.surface,
        key_id=principal.key_id,
        session_id=validate.optional_id(item.session_id, field="session_id"),
        run_id=validate.optional_id(item.run_id, field="run_id"),
        agent_id=principal.agent_id,
        model=validate.optional_name(item.model, field="model"),
        prompt_version=validate.optional_name(item.prompt_version, field="prompt_version"),
        quote=quote,
        quote_start=start,
        quote_end=end,
        **(item.turn.provenance() if item.turn is not None else {}),
    )
    memory = MemoryVersion(
        id=uuid.uuid4().hex,
        version=1,
        tenant_id=ref.tenant_id,
        scope=ref.scope,
        owner=ref.owner,
        project=project,
        text=body,
        kind=validate.enum(Kind, item.kind, field="kind"),
        status=first,
        confidence=validate.confidence(item.confidence),
        source=source,
        trust=Trust.UNVERIFIED if source in UNVERIFIED_SOURCES else Trust.VERIFIED,
        tags=tags,
        metadata=meta,
        aliases=aliases,
        provenance=provenance,
        observed_at=validate.instant(item.observed_at, field="observed_at"),
        valid_at=valid,
        invalid_at=invalid,
        recorded_at=now,
        content_hash=content_hash(body),
        embedding_model=embedding_model,
        relation=Relation.CREATED,
        actor=principal.key_id,
    )
    guard.screen(memory)  # SAFE-1, before any embedding is spent (or a secret sent out)
    if guard.injected(memory):  # SAFE-2: stored, out of every read path
        memory = replace(memory, status=Status.QUARANTINED)
    return memory
