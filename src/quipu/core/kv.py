"""The key/value plane's domain (KV-1): an entry's versions, its change, and the key rules.

Pure data and validation, no I/O. An entry is a family of versions per (scope partition, key):
each ``set`` or ``delete`` appends the next version and ends the one before it, so history and
``as_of`` reads work as they do for memories. Values are JSON, bounded like metadata; keys are
ASCII paths (:data:`KEY_PATTERN`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.records import Scope, ScopeRef
from quipu.errors import Conflict, InvalidInput, LimitExceeded, NotFound

#: Longest key, in characters (ASCII, so also bytes).
MAX_KEY_CHARS = 256
#: A key: ``/``-separated segments, each starting with a letter, digit or ``_`` and going on with
#: letters, digits and ``. _ : @ + = ~ -``. No empty segment, no leading or trailing ``/``, no
#: segment starting with ``.`` (so never ``.`` or ``..``), no space, control character or
#: non-ASCII letter: a key reads back byte for byte and fits a URL path unescaped.
KEY_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@+=~-]*(?:/[A-Za-z0-9_][A-Za-z0-9._:@+=~-]*)*")
#: A list prefix: any start of a key (so it may end with ``/``), or empty for every key.
PREFIX_PATTERN = re.compile(r"[A-Za-z0-9._:@+=~/-]*")
#: The first character after every key character (``~`` is the largest): ``prefix <= key <
#: prefix + KEY_END`` selects the keys starting with ``prefix`` in byte order.
KEY_END = "\x7f"


class EntryStatus(StrEnum):
    SET = "set"
    DELETED = "deleted"
    """A delete's version: the key reads as absent from then on; history keeps what it held."""
    ERASED = "erased"
    """Every version's value was wiped (compliance erase); nothing follows it."""


@dataclass(frozen=True)
class KVChange:
    """What one write appends: a value, or a delete (``value`` ignored)."""

    key: str
    value: Any
    status: EntryStatus
    actor: str
    surface: str
    agent_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class KVEntry:
    """One version of one key in one scope partition."""

    tenant_id: str
    scope: Scope
    owner: str
    key: str
    version: int
    value: Any
    status: EntryStatus
    actor: str
    surface: str
    agent_id: str | None
    reason: str | None
    recorded_at: datetime
    ended_at: datetime | None = None
    """When the next version replaced this one (None: current)."""

    def to_dict(self) -> dict[str, Any]:
        """The wire form. The owner is never shown (it holds the caller's own ids)."""
        return {
            "key": self.key,
            "scope": self.scope.value,
            "version": self.version,
            "value": self.value,
            "status": self.status.value,
            "actor": self.actor,
            "surface": self.surface,
            "agent_id": self.agent_id,
            "reason": self.reason,
            "recorded_at": self.recorded_at.isoformat(),
            "ended_at": None if self.ended_at is None else self.ended_at.isoformat(),
        }


def key(value: object, *, field: str = "key") -> str:
    """A valid key (:data:`KEY_PATTERN`, at most :data:`MAX_KEY_CHARS`); 422 ``invalid_key``."""
    if (
        not isinstance(value, str)
        or len(value) > MAX_KEY_CHARS
        or KEY_PATTERN.fullmatch(value) is None
    ):
        raise InvalidInput(
            f"{field} must be 1-{MAX_KEY_CHARS} ASCII characters: '/'-separated segments of "
            "letters, digits and . _ : @ + = ~ -, each starting with a letter, digit or _",
            code="invalid_key",
            details={"field": field},
        )
    return value


def prefix(value: object) -> str:
    """A list prefix: empty, or the start of a key; 422 ``invalid_key``."""
    if value is None:
        return ""
    if (
        not isinstance(value, str)
        or len(value) > MAX_KEY_CHARS
        or PREFIX_PATTERN.fullmatch(value) is None
    ):
        raise InvalidInput(
            "prefix must be the start of a key (letters, digits and . _ : @ + = ~ - /)",
            code="invalid_key",
            details={"field": "prefix"},
        )
    return value


def value(raw: object, *, max_bytes: int) -> Any:
    """A storable JSON value: bounded in depth, keys and integers like metadata
    (:func:`quipu.core.validate.json_value`), at most ``max_bytes`` serialised; strings kept as
    given (never normalised: the plane reads back exactly what was set). 422
    ``invalid_value`` / ``value_too_large``."""
    try:
        validate.json_value(raw, field="value")
        text = json.dumps(raw, allow_nan=False, ensure_ascii=False)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, code="invalid_value", details=exc.details) from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            f"value must be plain JSON: {exc}", code="invalid_value", details={"field": "value"}
        ) from None
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise InvalidInput(
            f"value is {size} bytes as JSON; the limit is {max_bytes}",
            code="value_too_large",
            details={"field": "value", "bytes": size, "limit": max_bytes},
        )
    return json.loads(text)


def check_write(
    change: KVChange, current: tuple[int, EntryStatus] | None, expected: int | None
) -> int:
    """The version ``change`` gets, after the compare-and-set; both backends call it inside
    the write's transaction.

    ``expected`` None: unconditional; 0: only if the key holds no value now (never set, or
    deleted); n: only if the current version is n (409 ``version_conflict`` otherwise).
    Deleting a key that holds no value is 404; an erased key takes no more writes (409
    ``erased``)."""
    version, status = current if current is not None else (0, EntryStatus.DELETED)
    live = status is EntryStatus.SET
    if status is EntryStatus.ERASED:
        raise Conflict(
            f"key {change.key} was erased; it takes no more writes",
            code="erased",
            details={"key": change.key},
        )
    if not (expected is None or expected == version or (expected == 0 and not live)):
        raise Conflict(
            f"key {change.key} is at version {version}, not {expected}",
            code="version_conflict",
            details={"key": change.key, "current_version": version, "expected_version": expected},
        )
    if change.status is EntryStatus.DELETED and not live:
        raise NotFound(f"no key {change.key}", details={"key": change.key})
    return version + 1


def quota_error(quota: int) -> LimitExceeded:
    return LimitExceeded(
        f"this scope already holds {quota} keys", code="quota_exceeded", details={"limit": quota}
    )


def entry_of(ref: ScopeRef, change: KVChange, version: int, now: datetime) -> KVEntry:
    return KVEntry(
        tenant_id=ref.tenant_id,
        scope=ref.scope,
        owner=ref.owner,
        key=change.key,
        version=version,
        value=change.value if change.status is EntryStatus.SET else None,
        status=change.status,
        actor=change.actor,
        surface=change.surface,
        agent_id=change.agent_id,
        reason=change.reason,
        recorded_at=now,
    )


def dump(entry: KVEntry) -> str | None:
    """The stored JSON text of an entry's value (None for a delete)."""
    if entry.status is not EntryStatus.SET:
        return None
    return json.dumps(entry.value, ensure_ascii=False, allow_nan=False)


def entry_audit(entry: KVEntry) -> AuditEvent:
    """The audit line of a key/value write, from the version itself (same transaction); it
    names the key, never the value."""
    return AuditEvent(
        tenant_id=entry.tenant_id,
        at=entry.recorded_at,
        actor_key=entry.actor,
        surface=entry.surface,
        action="kv.delete" if entry.status is EntryStatus.DELETED else "kv.set",
        target_ids=(entry.key,),
        agent_id=entry.agent_id,
        reason=entry.reason,
        details={"scope": entry.scope.value, "version": entry.version},
    )
