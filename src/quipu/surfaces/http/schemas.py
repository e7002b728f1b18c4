"""Request bodies of the HTTP API. Unknown fields are rejected (422), so a caller can never
smuggle a tenant, owner or subject in a body (SCOPE-2)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RememberBody(Body):
    text: str = Field(description="What to remember (secrets are refused).")
    scope: str = Field("agent", description="agent, user, agent_user, tenant or global.")
    kind: str = Field("fact", description="fact, preference, decision, procedure, episode, ...")
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    aliases: list[str] = Field(default_factory=list)
    project: str | None = None
    confidence: float = 1.0
    source: str = "explicit"
    observed_at: datetime | None = None
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    session_id: str | None = None
    run_id: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    quote: str | None = None
    quote_start: int | None = Field(None, description="The quote's start in its source turn.")
    quote_end: int | None = Field(None, description="The quote's end in its source turn.")
    status: str | None = Field(None, description="active (default) or candidate, for review.")


class FilterFields(Body):
    as_of: datetime | None = None
    observed_after: datetime | None = None
    observed_before: datetime | None = None
    kinds: list[str] | None = None
    tags: list[str] | None = None
    sources: list[str] | None = None
    min_confidence: float | None = None
    project: str | None = None
    statuses: list[str] | None = None

    def filters(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FilterFields.model_fields}


class RecallBody(FilterFields):
    query: Any = Field(description="The question, at most max_query_chars characters.")
    scope: str = "agent"
    k: int | None = Field(None, description="How many results (default_k when absent).")
    planes: list[str] | None = Field(None, description="Which planes to read (RECALL-8).")


class PatchBody(Body):
    text: str | None = Field(None, description="New text: writes a revised version.")
    status: str | None = Field(None, description="New status: moves the lifecycle (LIFE-1).")
    expected_version: int | None = Field(
        None, description="The version you read and replace (required: 428 without, LIFE-2)."
    )
    reason: str | None = None
    valid_at: datetime | None = None


class SupersedeBody(Body):
    new_id: str
    reason: str | None = None
    expected_version: int | None = Field(
        None, description="The version of the old memory you read (required: 428 without)."
    )


class ForgetBody(Body):
    reason: str | None = Field(None, description="Why; kept in history, never in a URL.")
    expected_version: int | None = Field(None, description="The version you read (optional).")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. version_conflict.")
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorEnvelope(BaseModel):
    """Every error response (API-2)."""

    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorEnvelope, "description": description}
    for status, description in {
        401: "Missing, unknown, expired or revoked credential",
        403: "The credential may not do this",
        404: "Not found (foreign ids look exactly like missing ones)",
        409: "Version conflict or illegal lifecycle move",
        413: "Request body too large",
        428: "A change must name the version it replaces (expected_version, LIFE-2)",
        422: "Invalid input; the code says which",
        429: "Quota or rate limit; Retry-After tells when to retry",
        503: "A dependency is unavailable; retry later",
    }.items()
}
