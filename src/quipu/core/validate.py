"""Input validation shared by every surface (MEM-5, RECALL-2, SAFE-5). Pure.

Each check raises :class:`InvalidInput` with a stable code naming what was wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from quipu.errors import InvalidInput

E = TypeVar("E", bound=StrEnum)

MAX_LABEL_CHARS = 128
MAX_ID_CHARS = 128


def text(value: object, *, max_bytes: int, field: str = "text") -> str:
    if not isinstance(value, str):
        raise InvalidInput(
            f"{field} must be a string", code="invalid_text", details={"field": field}
        )
    if not value.strip():
        raise InvalidInput(
            f"{field} must not be blank", code="invalid_text", details={"field": field}
        )
    if "\x00" in value:
        raise InvalidInput(
            f"{field} must not contain NUL characters",
            code="invalid_text",
            details={"field": field},
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{field} is not valid Unicode (lone surrogate)",
            code="invalid_text",
            details={"field": field},
        ) from None
    if size > max_bytes:
        raise InvalidInput(
            f"{field} is {size} bytes; the limit is {max_bytes}",
            code="text_too_long",
            details={"field": field, "bytes": size, "limit": max_bytes},
        )
    return value


def query(value: object, *, max_chars: int) -> str:
    """RECALL-2: checked before anything is embedded."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("query must be a non-blank string", code="invalid_query")
    if "\x00" in value:
        raise InvalidInput("query must not contain NUL characters", code="invalid_query")
    if len(value) > max_chars:
        raise InvalidInput(
            f"query is {len(value)} characters; the limit is {max_chars}",
            code="query_too_long",
            details={"chars": len(value), "limit": max_chars},
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("query is not valid Unicode", code="invalid_query") from None
    return value


def labels(value: object, *, field: str, max_count: int) -> tuple[str, ...]:
    """Tags or aliases: a list of distinct non-blank strings, bounded in count and length."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInput(f"{field} must be a list of strings", details={"field": field})
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or "\x00" in item:
            raise InvalidInput(
                f"each of {field} must be a non-blank string", details={"field": field}
            )
        if len(item) > MAX_LABEL_CHARS:
            raise InvalidInput(
                f"each of {field} must be at most {MAX_LABEL_CHARS} characters",
                details={"field": field},
            )
        if item.strip() not in out:
            out.append(item.strip())
    if len(out) > max_count:
        raise InvalidInput(
            f"at most {max_count} {field} are allowed, got {len(out)}",
            code=f"too_many_{field}",
            details={"field": field, "limit": max_count},
        )
    return tuple(out)


def metadata(value: object, *, max_bytes: int) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("metadata must be a JSON object", code="invalid_metadata")
    try:
        raw = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be plain JSON: {exc}", code="invalid_metadata") from None
    if len(raw.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidInput(
            f"metadata is larger than {max_bytes} bytes",
            code="metadata_too_large",
            details={"limit": max_bytes},
        )
    loaded: dict[str, Any] = json.loads(raw)
    return loaded


def confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput("confidence must be a number from 0 to 1", code="invalid_confidence")
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput("confidence must be a number from 0 to 1", code="invalid_confidence")
    return number


def enum(kind: type[E], value: object, *, field: str) -> E:
    try:
        return kind(str(value)) if isinstance(value, str) else kind(value)  # type: ignore[arg-type]
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise InvalidInput(
            f"{field} {value!r} is not one of: {allowed}",
            code=f"invalid_{field}",
            details={"field": field, "allowed": [m.value for m in kind]},
        ) from None


def enums(kind: type[E], values: object, *, field: str) -> frozenset[E]:
    if values is None:
        return frozenset()
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Iterable):
        raise InvalidInput(f"{field} must be a list", details={"field": field})
    return frozenset(enum(kind, v, field=field) for v in values)


def instant(value: object, *, field: str) -> datetime | None:
    """A datetime or ISO-8601 string; naive values are taken as UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{field} must be an ISO-8601 date-time",
                code="invalid_time",
                details={"field": field},
            ) from None
    if not isinstance(value, datetime):
        raise InvalidInput(
            f"{field} must be an ISO-8601 date-time", code="invalid_time", details={"field": field}
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInput(
            f"{field} is out of range", code="invalid_time", details={"field": field}
        ) from None


def identifier(value: object, *, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS or "\x00" in value:
        raise InvalidInput(
            f"{field} must be a non-empty string of at most {MAX_ID_CHARS} characters",
            code="invalid_id",
            details={"field": field},
        )
    return value


def optional_id(value: object, *, field: str) -> str | None:
    return None if value is None else identifier(value, field=field)


def bounded_int(value: object, *, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(
            f"{field} must be a whole number from {low} to {high}",
            code=f"invalid_{field}",
            details={"field": field, "min": low, "max": high},
        )
    return value
