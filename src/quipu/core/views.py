"""What an agent is shown of a recall (issue 27): compact hits by default, more on request.

A full hit carries the whole memory (provenance, hashes, actor, metadata...): ~30 times the
characters of the memory text itself. An agent mostly needs the text, what it is, how good a
match it is and when it was true, so a compact hit holds :data:`COMPACT_FIELDS`; ``fields``
adds named fields of the memory and ``verbose`` adds the whole memory under ``memory`` (the
shape the clients decode). :func:`recall_entries` renders a recall as one line per hit, the
default answer of the MCP tool. Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

from quipu.core.query import Hit, RecallResult
from quipu.core.records import Kind
from quipu.errors import InvalidInput

#: What every compact hit holds, in this order.
COMPACT_FIELDS = (
    "id",
    "version",
    "text",
    "kind",
    "scope",
    "score",
    "rank",
    "matched",
    "observed_at",
    "valid_at",
)
#: The fields of a memory a caller may add to a compact hit with ``fields``.
ExtraField = Literal[
    "project",
    "status",
    "confidence",
    "source",
    "trust",
    "tags",
    "aliases",
    "metadata",
    "provenance",
    "invalid_at",
    "recorded_at",
    "content_hash",
    "embedding_model",
    "relation",
    "actor",
    "reason",
    "related_id",
    "is_current",
]
EXTRA_FIELDS: tuple[str, ...] = get_args(ExtraField)
#: Most extra fields one request may name (there are no more than this many).
MAX_FIELDS = len(EXTRA_FIELDS)
#: How a line names a ``matched`` label: ``kw`` is a keyword (full-text) hit, which is what the
#: label ``text`` means (an exact copy of the text is one too), not an exact text match.
LINE_LABELS = {"semantic": "sem", "text": "kw", "alias": "alias"}


def check_fields(fields: object) -> tuple[str, ...]:
    """The requested extra fields, validated: a list of distinct names from
    :data:`EXTRA_FIELDS` (422 ``invalid_fields`` otherwise)."""
    if fields is None:
        return ()
    if not isinstance(fields, list | tuple) or len(fields) > MAX_FIELDS:
        raise InvalidInput(
            f"fields is a list of at most {MAX_FIELDS} field names",
            code="invalid_fields",
            details={"allowed": list(EXTRA_FIELDS)},
        )
    unknown = [f for f in fields if not isinstance(f, str) or f not in EXTRA_FIELDS]
    if unknown:
        shown = [f[:64] if isinstance(f, str) else type(f).__name__ for f in unknown[:5]]
        raise InvalidInput(
            "unknown field names in fields",
            code="invalid_fields",
            details={"unknown": shown, "allowed": list(EXTRA_FIELDS)},
        )
    return tuple(dict.fromkeys(fields))


def compact_hit(hit: Hit, fields: Sequence[str] = ()) -> dict[str, Any]:
    """A hit as an agent needs it: :data:`COMPACT_FIELDS` plus ``fields`` of the memory."""
    memory = hit.memory
    out: dict[str, Any] = {
        "id": memory.id,
        "version": memory.version,
        "text": memory.text,
        "kind": memory.kind.value,
        "scope": memory.scope.value,
        "score": round(hit.score, 6),
        "rank": hit.rank,
        "matched": list(dict.fromkeys(hit.matched)),
        "observed_at": _iso(memory.observed_at),
        "valid_at": memory.valid_at.isoformat(),
    }
    if fields:
        full = memory.to_dict()
        out.update((name, full[name]) for name in fields)
    return out


def recall_view(
    result: RecallResult, *, verbose: bool = False, fields: Sequence[str] = ()
) -> dict[str, Any]:
    """The recall answer of the HTTP API: compact hits; with ``verbose`` each also carries the
    whole memory under ``memory`` (what :func:`quipu.wire.recall_from_dict` decodes)."""
    results = []
    for hit in result.results:
        row = compact_hit(hit, fields)
        if verbose:
            row["memory"] = hit.memory.to_dict()
        results.append(row)
    return {"results": results, "meta": result.meta}


def recall_entries(result: RecallResult, fields: Sequence[str] = ()) -> tuple[str, list[str]]:
    """A recall as text: a header without memory text, and one entry per hit, best first (the
    MCP tool's default answer renders the entries as a data block, SAFE-2)::

        2 results in scope agent
        <id> 0.58 sem+kw 2024-04-29: The user's sister Theo visits next weekend.
        <id> v2 preference 0.41 2024-03-02: The user prefers aisle seats.

    The header adds ``(create_safety: exists|probable)`` when the query is (nearly) stored
    already (``unknown``, the usual answer, is left out) and ``keyword search only: <reason>``
    when semantic search did not run. Each entry: id, the version when it is not 1, the kind
    when it is not ``fact``, score, how it matched unless semantically only (``sem``
    semantic, ``kw`` keyword, ``alias`` an exact alias, joined by ``+``), the date it was
    observed (else the date it became valid), then the text (newlines shown as ``\\n``). A
    recall over several scopes names each hit's scope after its id. Each of ``fields``
    follows its hit on an indented ``name: JSON`` line of the same entry."""
    meta = result.meta
    scopes = meta.get("scopes")
    several = isinstance(scopes, dict) and len(scopes) > 1
    where = ", ".join(scopes) if isinstance(scopes, dict) else meta.get("scope", "?")
    count = len(result.results)
    head = f"{count} result{'' if count == 1 else 's'} in scope{'s' if several else ''} {where}"
    notes = []
    safety = meta.get("create_safety", "unknown")
    if safety != "unknown":  # "unknown" (nothing like it stored: write) goes without saying
        notes.append(f"create_safety: {safety}")
    if meta.get("fallback"):
        notes.append(f"keyword search only: {meta.get('reason') or 'no semantic search'}")
    entries = []
    for hit in result.results:
        memory = hit.memory
        parts = [memory.id]
        if several:
            parts.append(memory.scope.value)
        if memory.version != 1:
            parts.append(f"v{memory.version}")
        day = (memory.observed_at or memory.valid_at).date().isoformat()
        if memory.kind is not Kind.FACT:  # the default kind goes without saying
            parts.append(memory.kind.value)
        parts.append(f"{hit.score:.2f}")
        labels = _labels(hit.matched)
        if labels != "sem":  # a semantic-only match, the usual one, goes without saying
            parts.append(labels)
        parts.append(day)
        text = memory.text.replace("\r\n", "\n").replace("\n", "\\n")
        lines = [" ".join(parts) + ": " + text]
        if fields:
            full = memory.to_dict()
            lines += [
                f"  {name}: {json.dumps(full[name], ensure_ascii=False, default=str)}"
                for name in fields
            ]
        entries.append("\n".join(lines))
    return (f"{head} ({'; '.join(notes)})" if notes else head), entries


def _labels(matched: Iterable[str]) -> str:
    return "+".join(dict.fromkeys(LINE_LABELS.get(label, label) for label in matched)) or "-"


def _iso(value: Any) -> str | None:
    return None if value is None else str(value.isoformat())
