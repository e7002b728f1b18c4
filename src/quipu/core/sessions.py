"""Session turns (SESSION-1..3), their bounds, and the promotion watermark (PROMO-2). Pure data."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quipu.core.records import Principal
from quipu.errors import LimitExceeded

ROLES = ("user", "assistant", "system", "tool", "fact")
MAX_TURN_BYTES = 100 * 1024

# Watermark statuses: what the last promotion of a session ended as. Every outcome writes one
# (JOB-2), so the sweep never offers the same turns again in a loop.
PROMOTED = "promoted"
NOOP = "noop"  # 0 or 1 turn: nothing to compile (PROMO-2)
FAILED = "failed"  # a permanent failure: offered again only when new turns arrive
RETRY = "retry"  # a transient refusal (store busy, rate limited, embedder down)
OVER_BUDGET = "over_budget"  # the tenant's model budget was spent (PROMO-5)
#: Outcomes the sweep offers again, once the session has been idle a further sweep window.
RETRY_LATER = (RETRY, OVER_BUDGET)


@dataclass(frozen=True)
class SessionKey:
    """A session belongs to the subject that wrote it: same id, other subject = other session."""

    tenant_id: str
    owner: str
    session_id: str


def session_owner(principal: Principal) -> str:
    """The subject a session belongs to: the agent (or key) and, when present, the end user."""
    agent = principal.agent_id or principal.key_id
    return f"{agent}\x1f{principal.user_id or ''}"


@dataclass(frozen=True)
class SessionBounds:
    """What the session tier holds, checked inside the append transaction (issue 20, #8):
    turns per session, and bytes of turns per subject (all its sessions). Expired turns count
    until they are pruned; an append that would pass a bound prunes the subject's expired turns
    first."""

    max_turns: int = 10_000
    max_owner_bytes: int = 64 * 1024 * 1024


def turn_bytes(content: str, metadata_json: str) -> int:
    """What one turn costs against :attr:`SessionBounds.max_owner_bytes`: the UTF-8 bytes of its
    content and of its metadata as stored (the stores compute the same from the columns)."""
    return len(content.encode("utf-8", "surrogatepass")) + len(
        metadata_json.encode("utf-8", "surrogatepass")
    )


def check_bounds(session_turns: int, owner_bytes: int, size: int, bounds: SessionBounds) -> None:
    """429 ``quota_exceeded`` when one more turn of ``size`` bytes would pass a bound; the
    details name the bound (``session_max_turns`` or ``session_max_bytes_per_owner``)."""
    if session_turns + 1 > bounds.max_turns:
        raise LimitExceeded(
            f"this session holds {session_turns} turns, the most one may hold; start a new "
            "session or wait for its turns to expire",
            code="quota_exceeded",
            details={"limit": "session_max_turns", "max": bounds.max_turns},
        )
    if owner_bytes + size > bounds.max_owner_bytes:
        raise LimitExceeded(
            f"this subject's sessions hold {owner_bytes} bytes; a turn of {size} more would pass "
            f"the bound of {bounds.max_owner_bytes}; wait for turns to expire",
            code="quota_exceeded",
            details={
                "limit": "session_max_bytes_per_owner",
                "max": bounds.max_owner_bytes,
                "held": owner_bytes,
                "turn_bytes": size,
            },
        )


@dataclass(frozen=True)
class SessionTurn:
    session_id: str
    seq: int
    role: str
    content: str
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime
    observed_at: datetime | None = None
    """When the turn was said (the caller's time, issue 24); ``None`` reads as ``created_at``."""

    @property
    def said_at(self) -> datetime:
        """The turn's real time: ``observed_at`` when the caller gave one, else ``created_at``."""
        return self.observed_at or self.created_at

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "seq": self.seq,
            "role": self.role,
            "content": self.content,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "observed_at": self.said_at.isoformat(),
        }


@dataclass(frozen=True)
class Watermark:
    """What promotion last saw of a session: the fingerprint and last sequence number."""

    fingerprint: str
    last_seq: int
    status: str
    at: datetime
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IdleSession:
    """A session the sweep may promote, with the subject that last wrote it: the sweep's
    promotion acts as that subject (its key, role, agent and user), never as a shared one."""

    key: SessionKey
    last_seq: int
    last_at: datetime
    expires_at: datetime
    writer: Principal


def session_fingerprint(turns: Sequence[SessionTurn]) -> str:
    """A digest of exactly what an extractor would read (order, roles, contents)."""
    digest = hashlib.sha256()
    for turn in turns:
        digest.update(json.dumps([turn.seq, turn.role, turn.content]).encode())
        digest.update(b"\n")
    return digest.hexdigest()


@dataclass(frozen=True)
class SessionInfo:
    """One session as an operator lists it (OPS-4): its subject, the turns and bytes it holds,
    when its last unpruned turn was written, and what its last promotion ended as (``None``:
    never promoted)."""

    key: SessionKey
    turns: int
    bytes: int
    last_at: datetime | None
    promotion: str | None

    @property
    def agent(self) -> str:
        """The agent (or key) part of the session's subject."""
        return self.key.owner.partition("\x1f")[0]

    @property
    def user(self) -> str | None:
        """The end user part of the session's subject (``None`` when there is none)."""
        return self.key.owner.partition("\x1f")[2] or None
