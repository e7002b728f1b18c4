"""Session turns (SESSION-1..3) and their promotion watermark (PROMO-2). Pure data."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quipu.core.records import Principal

ROLES = ("user", "assistant", "system", "tool", "fact")
MAX_TURN_BYTES = 100 * 1024


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
class SessionTurn:
    session_id: str
    seq: int
    role: str
    content: str
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "seq": self.seq,
            "role": self.role,
            "content": self.content,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
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
    key: SessionKey
    last_seq: int
    last_at: datetime
    expires_at: datetime


def session_fingerprint(turns: Sequence[SessionTurn]) -> str:
    """A digest of exactly what an extractor would read (order, roles, contents)."""
    digest = hashlib.sha256()
    for turn in turns:
        digest.update(json.dumps([turn.seq, turn.role, turn.content]).encode())
        digest.update(b"\n")
    return digest.hexdigest()
