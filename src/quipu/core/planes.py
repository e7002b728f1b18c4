"""The planes a read can cover (RECALL-8): which exist, which a memory belongs to, and how a
plane selector narrows a memory recall. Pure; no I/O.

Memories of kind ``note`` form the ``notes`` plane, every other kind the ``facts`` plane;
``documents`` are the document chunks (DOC-1), ``kv`` the key/value entries (KV-1, exact key
match only), ``graph`` the entity graph's facts (GRAPH-1; served by search when asked for; the
memory recall reads memory planes only and names it unserved, never silently dropped).
"""

from __future__ import annotations

from collections.abc import Iterable

from quipu.core.records import Kind
from quipu.errors import InvalidInput

PLANES = ("facts", "notes", "documents", "kv", "graph")
MEMORY_PLANES = frozenset({"facts", "notes"})
#: What recall reads when no selector is given.
RECALL_DEFAULT = MEMORY_PLANES
_FACT_KINDS = frozenset(k for k in Kind if k is not Kind.NOTE)


def parse(value: object, *, default: frozenset[str]) -> frozenset[str]:
    """A plane selector: None for ``default``, else a non-empty list of known plane names
    (422 ``invalid_plane`` naming the unknown ones)."""
    if value is None:
        return default
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInput(
            "planes must be a list of plane names",
            code="invalid_plane",
            details={"field": "planes"},
        )
    names = list(value)
    unknown = [n for n in names if not isinstance(n, str) or n not in PLANES]
    if unknown or not names:
        raise InvalidInput(
            f"planes must be a non-empty list of {', '.join(PLANES)}",
            code="invalid_plane",
            details={"field": "planes", "unknown": [str(n)[:40] for n in unknown]},
        )
    return frozenset(names)


def plane_of(kind: Kind) -> str:
    """The plane a memory of ``kind`` belongs to."""
    return "notes" if kind is Kind.NOTE else "facts"


def memory_kinds(chosen: frozenset[str], kinds: frozenset[Kind]) -> frozenset[Kind] | None:
    """The kinds filter of a memory recall reading the planes ``chosen``, given the caller's
    own ``kinds`` filter (empty: any kind): empty for any kind, None when nothing is left to
    read (no memory plane chosen, or the caller's kinds lie outside them)."""
    allowed: frozenset[Kind] = frozenset()
    if "facts" in chosen:
        allowed |= _FACT_KINDS
    if "notes" in chosen:
        allowed |= {Kind.NOTE}
    if not allowed:
        return None
    if kinds:
        narrowed = kinds & allowed
        return narrowed or None
    return frozenset() if allowed == _FACT_KINDS | {Kind.NOTE} else allowed
