"""Input validation shared by every surface (MEM-5, RECALL-2, SAFE-5). Pure.

Each check raises :class:`InvalidInput` with a stable code naming what was wrong and, in
``details.field``, where (a path such as ``metadata.owner.name`` or ``tags[2]``).

The rules for anything that reaches storage (issue 20): strings are valid Unicode scalar
values (no lone surrogate) without NUL, free text is NFC-normalised and bounded; JSON values
are objects, arrays, strings, finite numbers within ±2**53, booleans and null, nested at most
:data:`MAX_JSON_DEPTH` deep with at most :data:`MAX_JSON_KEYS` keys in all; identifiers match
:data:`ID_PATTERN`. :func:`stored_strings` checks a whole record the same way, whatever path
built it, so the stores can re-check every write (``quipu.storage.admission``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from enum import Enum, StrEnum
from typing import Any, TypeVar

from quipu.errors import InvalidInput
from quipu.safety.secrets import find_secrets, secret_error

E = TypeVar("E", bound=StrEnum)

MAX_LABEL_CHARS = 128
MAX_ID_CHARS = 128
#: Deepest nesting of a JSON value (metadata, audit details): ``{"a": {"b": 1}}`` is 2 deep.
MAX_JSON_DEPTH = 8
#: Keys in one JSON value, counted over every nested object.
MAX_JSON_KEYS = 256
#: Largest magnitude of a JSON integer: what every JSON client reads exactly (2**53).
MAX_JSON_INT = 2**53
#: Identifiers a caller chooses (session, run, project, agent and user ids): ASCII letters and
#: digits first, then also ``. _ : @ + = ~ -``; no space, slash, quote or control character,
#: so ids never contain the separators stored keys are joined with and fit a URL path segment.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=~-]{0,127}")
#: Model and prompt version names may also hold ``/`` (``org/model:tag``).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=~/-]{0,127}")


def string_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored (``"nul"``, ``"lone_surrogate"``), or None."""
    if "\x00" in value:
        return "nul"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "lone_surrogate"
    return None


def _bad_string(field: str, problem: str) -> InvalidInput:
    what = "a NUL character" if problem == "nul" else "a lone surrogate (not valid Unicode)"
    return InvalidInput(
        f"{field} holds {what}", code="invalid_text", details={"field": field, "problem": problem}
    )


def clean_string(value: str, field: str) -> str:
    """``value`` NFC-normalised, refused when it holds NUL or a lone surrogate."""
    problem = string_problem(value)
    if problem is not None:
        raise _bad_string(field, problem)
    return unicodedata.normalize("NFC", value)


def text(value: object, *, max_bytes: int, field: str = "text", instead: str | None = None) -> str:
    """A bounded, clean, non-blank string, NFC-normalised. ``instead`` names the path that keeps
    a text over the limit (said in the 422, so an agent does not simply lose it)."""
    if not isinstance(value, str):
        raise InvalidInput(
            f"{field} must be a string", code="invalid_text", details={"field": field}
        )
    if not value.strip():
        raise InvalidInput(
            f"{field} must not be blank", code="invalid_text", details={"field": field}
        )
    value = clean_string(value, field)
    size = len(value.encode("utf-8"))
    if size > max_bytes:
        details: dict[str, object] = {"field": field, "bytes": size, "limit": max_bytes}
        message = f"{field} is {size} bytes; the limit is {max_bytes}"
        if instead is not None:
            details["instead"] = instead
            message += f"; {instead}"
        raise InvalidInput(message, code="text_too_long", details=details)
    return value


def query(value: object, *, max_chars: int) -> str:
    """RECALL-2: checked before anything is embedded."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("query must be a non-blank string", code="invalid_query")
    if string_problem(value) is not None:
        raise InvalidInput(
            "query must be valid Unicode without NUL characters", code="invalid_query"
        )
    if len(value) > max_chars:
        raise InvalidInput(
            f"query is {len(value)} characters; the limit is {max_chars}",
            code="query_too_long",
            details={"chars": len(value), "limit": max_chars},
        )
    return value


def labels(value: object, *, field: str, max_count: int) -> tuple[str, ...]:
    """Tags or aliases: a list of distinct non-blank strings, bounded in count and length."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInput(f"{field} must be a list of strings", details={"field": field})
    out: list[str] = []
    for at, raw in enumerate(value):
        if not isinstance(raw, str) or not raw.strip():
            raise InvalidInput(
                f"each of {field} must be a non-blank string", details={"field": f"{field}[{at}]"}
            )
        item = clean_string(raw, f"{field}[{at}]")
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
    json_value(value, field="metadata")
    try:
        raw = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be plain JSON: {exc}", code="invalid_metadata") from None
    if len(raw.encode("utf-8")) > max_bytes:
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


def identifier(value: object, *, field: str, pattern: re.Pattern[str] = ID_PATTERN) -> str:
    """An id a caller chose: :data:`ID_PATTERN` (1 to 128 characters), and no secret (SAFE-1:
    an id is stored, logged and echoed, so a token pasted as a session id is refused like one
    in a text, wherever the id came from: path, query, header or body)."""
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise InvalidInput(
            f"{field} must be 1 to {MAX_ID_CHARS} characters: ASCII letters and digits, then"
            f" also {'. _ : @ + = ~ - /' if pattern is NAME_PATTERN else '. _ : @ + = ~ -'}",
            code="invalid_id",
            details={"field": field},
        )
    screen_identifier(value, field=field)
    return value


def screen_identifier(value: str, *, field: str) -> None:
    """422 ``secret_detected`` (naming ``field``, never the value) when ``value`` holds one."""
    if findings := find_secrets(value):
        error = secret_error(findings)
        error.details["field"] = field
        raise error


#: The shape of an API key's id (``core.auth.new_secret``): an agent id may not take it, so the
#: ``agent`` scope of a key without an agent id is never another agent's (issue 20 defect 7).
KEY_ID_SHAPE = re.compile(r"[0-9a-f]{16}")


def agent_id(value: object) -> str:
    """An agent id: :data:`ID_PATTERN`, and not shaped like a key id (:data:`KEY_ID_SHAPE`)."""
    ident = identifier(value, field="agent_id")
    if KEY_ID_SHAPE.fullmatch(ident):
        raise InvalidInput(
            "agent_id may not have the shape of a key id (16 hexadecimal digits)",
            code="invalid_id",
            details={"field": "agent_id"},
        )
    return ident


def optional_id(value: object, *, field: str) -> str | None:
    return None if value is None else identifier(value, field=field)


def optional_name(value: object, *, field: str) -> str | None:
    """A model or prompt version name: :data:`NAME_PATTERN`, or None."""
    return None if value is None else identifier(value, field=field, pattern=NAME_PATTERN)


def json_value(value: object, *, field: str) -> None:
    """Refuse a JSON value that storage must not hold (see the module docstring). The walk
    stops at :data:`MAX_JSON_DEPTH`, so no input can exhaust the interpreter's stack."""
    keys = 0
    for path, item, depth in _json_items(value, field, 0):
        if depth > MAX_JSON_DEPTH:
            raise InvalidInput(
                f"{field} is nested more than {MAX_JSON_DEPTH} deep",
                code="invalid_metadata",
                details={"field": path, "limit": MAX_JSON_DEPTH},
            )
        if isinstance(item, dict):
            keys += len(item)
            if keys > MAX_JSON_KEYS:
                raise InvalidInput(
                    f"{field} holds more than {MAX_JSON_KEYS} keys",
                    code="invalid_metadata",
                    details={"field": field, "limit": MAX_JSON_KEYS},
                )
        elif isinstance(item, str):
            problem = string_problem(item)
            if problem is not None:
                raise _bad_string(path, problem)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_JSON_INT:
                raise InvalidInput(
                    f"{path} is outside ±2**53",
                    code="invalid_metadata",
                    details={"field": path},
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(
                    f"{path} is not a finite number",
                    code="invalid_metadata",
                    details={"field": path},
                )
        elif not isinstance(item, list):
            raise InvalidInput(
                f"{path} is not a JSON value", code="invalid_metadata", details={"field": path}
            )


def _json_items(value: object, path: str, depth: int) -> Iterator[tuple[str, object, int]]:
    """(path, value, depth) of ``value`` and everything inside it, parents first; a container
    past :data:`MAX_JSON_DEPTH` is yielded but not entered."""
    stack: list[tuple[str, object, int]] = [(path, value, depth)]
    while stack:
        where, item, level = stack.pop()
        yield where, item, level
        if level > MAX_JSON_DEPTH:
            continue
        if isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                if not isinstance(key, str):
                    raise InvalidInput(
                        f"{where} has a key that is not a string",
                        code="invalid_metadata",
                        details={"field": where},
                    )
                yield f"{where}.{key}", key, level + 1
                stack.append((f"{where}.{key}", inner, level + 1))
        elif isinstance(item, list | tuple):
            stack.extend(
                (f"{where}[{i}]", inner, level + 1) for i, inner in reversed(list(enumerate(item)))
            )


def stored_strings(record: object, field: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside ``record`` (a dataclass, mapping, sequence or scalar) with its path,
    each checked like :func:`clean_string` (NUL and lone surrogates refused); JSON-shaped parts
    are also bounded like :func:`json_value`. Enum values and times are skipped."""
    for path, item, depth in _record_items(record, field, 0):
        if depth > MAX_JSON_DEPTH + 2:  # the record and its field hold the JSON root
            raise InvalidInput(
                f"{path} is nested more than {MAX_JSON_DEPTH} deep",
                code="invalid_metadata",
                details={"field": path, "limit": MAX_JSON_DEPTH},
            )
        if isinstance(item, str) and not isinstance(item, Enum):
            problem = string_problem(item)
            if problem is not None:
                raise _bad_string(path or "value", problem)
            yield path, item
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > 2**63 - 1:
            raise InvalidInput(
                f"{path} is out of range", code="invalid_metadata", details={"field": path}
            )
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(
                f"{path} is not a finite number", code="invalid_metadata", details={"field": path}
            )


#: The field names of each dataclass the walk met (None: not a dataclass): a write's records
#: are walked on every admission, and ``dataclasses.fields`` per item was most of the walk.
_FIELDS: dict[type, tuple[str, ...] | None] = {}
#: Leaf types, yielded and never entered.
_LEAVES = (str, int, float, bool, type(None), datetime)


def _field_names(cls: type) -> tuple[str, ...] | None:
    if cls not in _FIELDS:
        dataclass = dataclasses.is_dataclass(cls)
        _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls)) if dataclass else None
    return _FIELDS[cls]


def _record_items(record: object, path: str, depth: int) -> Iterator[tuple[str, object, int]]:
    stack: list[tuple[str, object, int]] = [(path, record, depth)]
    while stack:
        where, item, level = stack.pop()
        yield where, item, level
        if level > MAX_JSON_DEPTH + 2 or isinstance(item, _LEAVES):
            continue
        prefix = f"{where}." if where else ""
        names = None if isinstance(item, type) else _field_names(type(item))
        if names:
            stack.extend(
                (f"{prefix}{name}", getattr(item, name), level + 1) for name in reversed(names)
            )
        elif isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                yield f"{prefix}{key}", key, level + 1
                stack.append((f"{prefix}{key}", inner, level + 1))
        elif isinstance(item, list | tuple | frozenset | set):
            ordered = sorted(item, key=str) if isinstance(item, frozenset | set) else list(item)
            stack.extend(
                (f"{where}[{i}]", inner, level + 1)
                for i, inner in reversed(list(enumerate(ordered)))
            )


def bounded_int(value: object, *, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(
            f"{field} must be a whole number from {low} to {high}",
            code=f"invalid_{field}",
            details={"field": field, "min": low, "max": high},
        )
    return value


def quote_span(quote: str | None, start: object, end: object) -> tuple[int | None, int | None]:
    """The quote's offsets in its source turn (MEM-3): both or neither, 0 <= start <= end, and
    ``end - start`` the quote's length."""
    if start is None and end is None:
        return None, None
    if quote is None or start is None or end is None:
        raise InvalidInput(
            "quote_start and quote_end come together, with the quote they locate",
            code="invalid_quote_span",
            details={"field": "quote_start"},
        )
    low = bounded_int(start, field="quote_start", low=0, high=2**31)
    high = bounded_int(end, field="quote_end", low=low, high=2**31)
    if high - low != len(quote):
        raise InvalidInput(
            "quote_end - quote_start must be the quote's length",
            code="invalid_quote_span",
            details={"field": "quote_end"},
        )
    return low, high
