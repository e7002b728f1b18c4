"""Screening structured values: every string in a JSON-like value, with its field path.

Metadata, tags, aliases and other stored fields arrive as nested dicts and lists. The walk is
iterative (no recursion, so no ``RecursionError`` on a 10,000-deep value) and refuses a value
nested deeper than ``max_depth`` with a 422 naming the path. A string under a key that names
a secret (``{"password": "..."}``) is judged as a value assigned to that key, so a password
stored as metadata is refused the same way ``password = "..."`` is in text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from quipu.errors import InvalidInput
from quipu.safety.injection import looks_like_injection
from quipu.safety.secret_context import API_KEY, key_kind
from quipu.safety.secret_values import password_value_is_secret, token_value_is_secret
from quipu.safety.secrets import SecretFinding, find_secrets

__all__ = [
    "MAX_DEPTH",
    "FieldFinding",
    "find_injection_fields",
    "find_secrets_in_value",
    "walk_strings",
]

#: Deepest nesting the walk accepts; write paths bound JSON depth far lower (issue 20).
MAX_DEPTH = 32


@dataclass(frozen=True)
class FieldFinding(SecretFinding):
    """A finding inside one string of a structured value: ``field`` is its path
    (``metadata.db.password``, ``tags[2]``, ``metadata.<key>`` for a key itself)."""

    field: str = ""


def _child(path: str, key: object) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def walk_strings(
    value: object, *, field: str = "value", max_depth: int = MAX_DEPTH
) -> Iterator[tuple[str, str | None, str]]:
    """``(path, key, string)`` for every string in ``value``: dict keys (path ending in
    ``.<key>``, key None), dict values and list items (``key`` is the dict key naming the
    string, when there is one). Raises 422 ``value_too_deep`` past ``max_depth``."""
    stack: list[tuple[str, object, str | None, int]] = [(field, value, None, 0)]
    while stack:
        path, item, key, depth = stack.pop()
        if isinstance(item, str):
            yield path, key, item
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                raise InvalidInput(
                    f"{path} is nested deeper than {max_depth} levels",
                    code="value_too_deep",
                    details={"field": path, "max_depth": max_depth},
                )
            if isinstance(item, dict):
                entries = list(item.items())
                for name, child in reversed(entries):
                    child_path = _child(path, name)
                    stack.append((child_path, child, str(name), depth + 1))
                    if isinstance(name, str):
                        stack.append((f"{path}.<key>", name, None, depth + 1))
            else:
                for index in range(len(item) - 1, -1, -1):
                    stack.append((_child(path, index), item[index], key, depth + 1))


def _named_value_is_secret(key: str, value: str) -> str | None:
    kind = key_kind(key)
    if kind is None:
        return None
    if kind == API_KEY:
        return kind if token_value_is_secret(value) else None
    env_key = key.isupper()
    return kind if password_value_is_secret(value, quoted=True, env_key=env_key) else None


def find_secrets_in_value(
    value: object, *, field: str = "value", max_depth: int = MAX_DEPTH
) -> list[FieldFinding]:
    """SAFE-1 over every string of a structured value; spans are offsets in that string."""
    found: list[FieldFinding] = []
    for path, key, text in walk_strings(value, field=field, max_depth=max_depth):
        findings = find_secrets(text)
        found += [FieldFinding(f.kind, f.start, f.end, field=path) for f in findings]
        if not findings and key is not None and text:
            kind = _named_value_is_secret(key, text.strip())
            if kind is not None:
                found.append(FieldFinding(kind, 0, len(text), field=path))
    return found


def find_injection_fields(
    value: object, *, field: str = "value", max_depth: int = MAX_DEPTH
) -> list[str]:
    """Paths of the strings in ``value`` that look like prompt injections (SAFE-2)."""
    return [
        path
        for path, _, text in walk_strings(value, field=field, max_depth=max_depth)
        if looks_like_injection(text)
    ]
