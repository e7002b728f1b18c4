"""What the transport refuses before any request reaches the service (SAFE-5, issue 20).

Pure functions over the raw request: a JSON document nested deeper than
:data:`MAX_JSON_DEPTH`, and any string in it (key or value) holding a lone surrogate or a NUL,
are refused with the path of the offending field; so is a NUL in the URL path or a query
parameter. Nothing here recurses: a hostile document costs one C parse and one iterative walk,
and most documents take the fast path (no ``\\u`` escape, few brackets) without being parsed.

The HTTP API answers a :class:`Refusal` with 422 in the error envelope; the MCP transports
answer it with a JSON-RPC error carrying the request's id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

#: Deepest nesting of objects and arrays a request document may have (the document itself is
#: depth 1). The service bounds ``metadata`` more tightly; this bound keeps every recursive
#: walk after the transport (validation, screening, serialisation) far from the interpreter's
#: recursion limit.
MAX_JSON_DEPTH = 32

#: A lone surrogate (JSON can carry one as a ``\\ud800`` escape; a valid pair parses to one
#: astral character) or a NUL: neither is text that can be stored, indexed or echoed back.
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: a stable ``code``, a message, and the offending field's path
    (``body.tags.0``, ``query.reason``, ``params.arguments.metadata``)."""

    code: str
    message: str
    field: str

    def details(self) -> dict[str, Any]:
        return {"field": self.field}


def screen_json(
    raw: bytes | str, *, root: str = "body", max_depth: int = MAX_JSON_DEPTH
) -> Refusal | None:
    """A refusal for a JSON document that is too deep or holds invalid text; ``None`` when it
    is acceptable *or not JSON at all* (the framework's own parser then answers that)."""
    document = parse_json(raw, root=root, max_depth=max_depth)
    if isinstance(document, Refusal):
        return document
    if document is UNPARSED:
        return None
    return screen_value(document, root=root, max_depth=max_depth)


class _Unparsed:
    """The document took the fast path or is not JSON."""


#: What :func:`parse_json` returns for a document it did not need to (or could not) parse.
UNPARSED: Any = _Unparsed()


def parse_json(raw: bytes | str, *, root: str = "body", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The parsed document when it needs a closer look; :data:`UNPARSED` when it cannot hold a
    problem (no ``\\u`` escape and fewer brackets than ``max_depth``) or is not JSON; a
    :class:`Refusal` when it is too deep even to parse, or (bytes) not UTF-8 text.

    Bytes are decoded strictly here: Python's own ``json.loads(bytes)``, which the framework
    calls, would accept UTF-16 and decode the UTF-8 bytes of a lone surrogate with
    ``surrogatepass``, around any check made on escapes alone."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            return Refusal(
                "invalid_text", f"{root or 'the message'} is not UTF-8 text", root or "message"
            )
    else:
        text = raw
        if _BAD_CHAR.search(text):
            return _parse(text, root, max_depth)
    if "\\u" not in text and text.count("[") + text.count("{") <= max_depth:
        return UNPARSED
    return _parse(text, root, max_depth)


def _parse(text: str, root: str, max_depth: int) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        return too_deep(root, max_depth)
    except ValueError:
        return UNPARSED


def screen_value(document: object, *, root: str, max_depth: int = MAX_JSON_DEPTH) -> Refusal | None:
    """Walk a parsed document without recursion; the first problem found, with its path."""
    # Each entry: (value, depth of the container holding it, path as a linked (key, parent)).
    stack: list[tuple[object, int, tuple[object, Any]]] = [(document, 0, (root, None))]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if _BAD_CHAR.search(value):
                return invalid_text(_dotted(path))
        elif isinstance(value, dict):
            if depth + 1 > max_depth:
                return too_deep(_dotted(path), max_depth)
            for key, item in value.items():
                if isinstance(key, str) and _BAD_CHAR.search(key):
                    return invalid_text(_dotted((_printable(key), path)), key=True)
                stack.append((item, depth + 1, (key, path)))
        elif isinstance(value, list):
            if depth + 1 > max_depth:
                return too_deep(_dotted(path), max_depth)
            stack.extend((item, depth + 1, (index, path)) for index, item in enumerate(value))
    return None


def screen_url(path: str, query_string: bytes) -> Refusal | None:
    """A NUL in the (decoded) URL path or in a query parameter's name or value. Query strings
    decode with replacement (as Starlette decodes them), so they cannot carry a lone
    surrogate; a NUL arrives as ``%00``."""
    if "\x00" in path:
        return invalid_text("path")
    if b"%00" not in query_string:
        return None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return invalid_text(f"query.{_printable(name)}")
    return None  # pragma: no cover - "%00" always decodes to a NUL somewhere


def invalid_text(field: str, *, key: bool = False) -> Refusal:
    what = "a key that holds" if key else "text holding"
    return Refusal(
        "invalid_text",
        f"{field} is {what} a NUL or a lone surrogate; send valid Unicode text",
        field,
    )


def too_deep(field: str, max_depth: int) -> Refusal:
    return Refusal(
        "json_too_deep",
        f"the JSON document is nested deeper than {max_depth} levels (at {field or 'its top'})",
        field,
    )


def _dotted(path: tuple[object, Any]) -> str:
    parts: list[str] = []
    node: tuple[object, Any] | None = path
    while node is not None:
        parts.append(str(node[0])[:64])
        node = node[1]
    parts.reverse()
    if parts and not parts[0]:
        parts = parts[1:]  # an unnamed root: the path starts at the document's first key
    if len(parts) > 12:  # a path into a deep document: its head and where it ends
        parts = [*parts[:6], "...", *parts[-5:]]
    return ".".join(parts)


def _printable(text: str) -> str:
    """A key or name as it may appear in an error message: bad characters escaped."""
    return _BAD_CHAR.sub(lambda m: f"\\u{ord(m.group()):04x}", text)[:64]
