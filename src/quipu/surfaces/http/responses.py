"""The answers of the HTTP API as typed models, for the OpenAPI document (API-2, issue 27): a
client generated from it gets real types instead of ``object``.

Endpoints still build their JSON themselves (:class:`SafeJSONResponse`: FastAPI would walk the
dict again and turns a stored lone surrogate into a 500), so these models document; a test
checks real answers against them (``tests/surfaces/test_http_conventions.py``). Fields an
answer may leave out are optional; unknown fields are allowed (answers grow).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class ProvenanceOut(Answer):
    surface: str | None = None
    key_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    quote: str | None = None
    turn_seq: int | None = None
    turn_role: str | None = None
    turn_start: int | None = None
    turn_end: int | None = None


class MemoryOut(Answer):
    """One version of a memory."""

    id: str
    version: int
    scope: str
    project: str | None
    text: str
    kind: str
    status: str
    confidence: float
    source: str
    trust: str
    tags: list[str]
    metadata: dict[str, Any]
    aliases: list[str]
    provenance: ProvenanceOut
    observed_at: str | None
    valid_at: str
    invalid_at: str | None
    recorded_at: str
    content_hash: str
    embedding_model: str | None
    relation: str
    actor: str
    reason: str | None
    related_id: str | None
    is_current: bool


class NoticeOut(Answer):
    code: str = Field(description="quarantined: stored but held for review (SAFE-2).")
    message: str


class RememberOut(Answer):
    memory: MemoryOut
    created: bool = Field(description="False: an exact duplicate already existed (MEM-6).")
    notice: NoticeOut | None = Field(
        None,
        description="Present when the write was held for review: it is not recalled until a"
        " reviewer activates it (POST /v1/review/{id}).",
    )


class MemoryPageOut(Answer):
    items: list[MemoryOut]
    next_cursor: str | None


class HistoryOut(Answer):
    versions: list[MemoryOut]


class HitOut(Answer):
    """A compact hit; ``fields`` adds named memory fields, ``verbose`` adds ``memory``."""

    id: str
    version: int
    text: str
    kind: str
    scope: str
    score: float
    rank: int
    matched: list[str] = Field(description="semantic, text (a keyword hit) or alias.")
    observed_at: str | None
    valid_at: str
    memory: MemoryOut | None = None


class RecallOut(Answer):
    results: list[HitOut]
    meta: dict[str, Any] = Field(
        description="total, limit, fallback, reason, underfilled, create_safety, timings, "
        "paths, scope (or scopes: each scope's own meta)."
    )


class TurnOut(Answer):
    session_id: str
    seq: int
    role: str
    content: str
    metadata: dict[str, Any]
    created_at: str
    expires_at: str
    observed_at: str | None = None


class TurnsOut(Answer):
    turns: list[TurnOut]


class JobOut(Answer):
    """A job: the handle every caller sees; admins also get the queue's fields."""

    job_id: str
    kind: str
    status: str
    attempts: int
    max_attempts: int
    run_after: str | None
    created_at: str | None
    updated_at: str | None
    last_error: str | None
    result: dict[str, Any]
    finished_at: str | None
    tenant_id: str | None = None
    idempotency_key: str | None = None
    fencing_token: int | None = None
    lease_owner: str | None = None
    lease_expires_at: str | None = None
    checkpoint: dict[str, Any] | None = None


class PromoteOut(Answer):
    job: JobOut
    created: bool


class JobsOut(Answer):
    items: list[JobOut]


class CredentialOut(Answer):
    tenant_id: str
    key_id: str
    kind: str
    role: str
    name: str | None
    agent_id: str | None
    user_id: str | None
    grants: list[str]
    parent_key_id: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None


class TokenOut(Answer):
    token: str = Field(description="The run token, shown once.")
    credential: CredentialOut


class AuditEventOut(Answer):
    seq: int | None
    tenant_id: str
    at: str
    actor_key: str
    role: str | None
    agent_id: str | None
    user_id: str | None
    surface: str
    action: str
    target_ids: list[str]
    reason: str | None
    details: dict[str, Any]


class AuditPageOut(Answer):
    items: list[AuditEventOut]
    next_cursor: str | None


class HealthOut(Answer):
    status: str
    backend: str
    vector_search: str
    embedder: str | None


class ReadyOut(Answer):
    status: str = Field(description="ready, or unavailable (503).")
    checks: dict[str, dict[str, Any]] = Field(description="store and embedder: ok, and why not.")


# -- governance (issue 22): typed too, so a generated client gets them (issue 27) --------------
class EraseOut(Answer):
    tombstone: MemoryOut
    families: int
    counts: dict[str, int]


class HoldOut(Answer):
    hold_id: str
    kind: str
    target: str
    reason: str
    created_by: str
    created_at: str
    released_by: str | None
    released_at: str | None
    release_reason: str | None
    active: bool


class HoldsOut(Answer):
    items: list[HoldOut]


class SnapshotMemberOut(Answer):
    id: str
    version: int
    memory: MemoryOut | None = None
    withheld: str | None = None


class SnapshotOut(Answer):
    snapshot_id: str
    label: str | None
    created_by: str
    created_at: str
    members: list[SnapshotMemberOut]


class ProjectOut(Answer):
    project_id: str
    name: str | None
    created_by: str
    created_at: str


class ProjectsOut(Answer):
    items: list[ProjectOut]


class SubjectOut(Answer):
    scope: str
    owner: str
    live: int
    agent_id: str | None = None
    user_id: str | None = None


class SubjectPageOut(Answer):
    items: list[SubjectOut]
    next_cursor: str | None
