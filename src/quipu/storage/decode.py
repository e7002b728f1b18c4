"""Reading rows that should not exist (issue 20: reads never 500 on a stored row).

The write boundary (:mod:`quipu.storage.admission`) keeps new garbage out, but a database can
still hold rows written before it, by another tool, or by hand: JSON with an escaped lone
surrogate (``"\\ud800"``), a status no version of Quipu knows, text that is not UTF-8. A read
must not fail on such a row, and must not fail for every other row beside it: both backends
decode rows through :func:`decode_rows` / :func:`decode_row`, which skip a row that cannot be
decoded with a logged warning (its key, never its content), and :func:`loads` replaces a lone
surrogate in JSON by U+FFFD, so every string a read returns can be encoded as UTF-8.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

log = logging.getLogger("quipu.storage")

_SURROGATE = re.compile("[\ud800-\udfff]")

R = TypeVar("R")
T = TypeVar("T")

#: What decoding a malformed row raises: bad JSON, an unknown enum value, a missing field.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)


def loads(raw: str | bytes) -> Any:
    """``json.loads`` whose strings are always valid Unicode: a lone surrogate escape
    (``\\ud800``) becomes U+FFFD. The check costs a substring search; only JSON holding such an
    escape is walked."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else raw
    value = json.loads(text)
    if "\\ud" in text or "\\uD" in text:
        cleaned = _scrub(value)
        if cleaned != value:
            log.warning("a stored JSON value held a lone surrogate; read as U+FFFD")
        return cleaned
    return value


def decode_row(decode: Callable[[R], T], row: R, key: object) -> T | None:
    """``decode(row)``, or None (logged, by ``key``) when the row is malformed."""
    try:
        return decode(row)
    except _MALFORMED as exc:
        log.warning("skipped stored row %s that cannot be read: %s", key, type(exc).__name__)
        return None


def decode_rows(decode: Callable[[R], T], rows: Iterable[R], key: Callable[[R], object]) -> list[T]:
    """Every row of ``rows`` that decodes, in order; malformed ones skipped and logged."""
    out: list[T] = []
    for row in rows:
        found = decode_row(decode, row, key(row))
        if found is not None:
            out.append(found)
    return out


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value
