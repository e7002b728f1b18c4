"""JSON responses that always serialise (SAFE-5, issue 20).

A value that cannot be written as UTF-8 JSON (a lone surrogate that reached storage, a
non-finite number, nesting past the encoder's recursion limit) must not turn a read into a 500
for every caller of the scope. The fast path is Starlette's own encoding; only when it fails
is the content copied with those values replaced, and a warning logged.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

from starlette.responses import JSONResponse

log = logging.getLogger("quipu.http")

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Deeper than this, a value is replaced by :data:`TOO_DEEP` in the defensive copy.
MAX_RESPONSE_DEPTH = 64
TOO_DEEP = "[nested too deep]"


class SafeJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            return dumps(content)
        except (UnicodeEncodeError, ValueError, RecursionError, TypeError) as exc:
            log.warning(
                "a response held a value JSON cannot carry (%s); it was sent with lone "
                "surrogates replaced by U+FFFD, non-finite numbers by null and nesting past "
                "%d levels cut",
                type(exc).__name__,
                MAX_RESPONSE_DEPTH,
            )
            return dumps(json_safe(content))


def dumps(content: Any) -> bytes:
    """Starlette's encoding: compact, UTF-8, no NaN."""
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


def json_safe(value: Any, *, max_depth: int = MAX_RESPONSE_DEPTH) -> Any:
    """A copy of ``value`` that JSON can always carry, made without recursion: lone
    surrogates become U+FFFD, non-finite floats ``None``, containers deeper than ``max_depth``
    :data:`TOO_DEEP`, anything else not JSON its ``str``."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 0)]
    while stack:
        item, parent, key, depth = stack.pop()
        if isinstance(item, str):
            parent[key] = clean_text(item)
        elif item is None or isinstance(item, bool | int):
            parent[key] = item
        elif isinstance(item, float):
            parent[key] = item if math.isfinite(item) else None
        elif isinstance(item, dict | list | tuple) and depth >= max_depth:
            parent[key] = TOO_DEEP
        elif isinstance(item, dict):
            copy: dict[str, Any] = {}
            parent[key] = copy
            for k, v in item.items():
                name = clean_text(str(k))
                copy[name] = None
                stack.append((v, copy, name, depth + 1))
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[key] = items
            stack.extend((v, items, i, depth + 1) for i, v in enumerate(item))
        else:
            parent[key] = clean_text(str(item))
    return holder[0]


def clean_text(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)
