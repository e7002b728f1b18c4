"""Memory rendered for a model (SAFE-2): the text of a tool result that holds memories is a
block that says it holds data, with role and envelope markers and known injection phrasings
defanged (:func:`quipu.safety.render_data_block`). The structured content keeps the raw JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from quipu.safety import render_data_block


def memory_line(memory: Mapping[str, Any], extra: str = "") -> str:
    """One memory as a line of the block: its id, version, scope, kind and status, then text."""
    head = (
        f"[{memory.get('id')} v{memory.get('version')} {memory.get('scope')}"
        f" {memory.get('kind')} {memory.get('status')}{extra}]"
    )
    return f"{head} {memory.get('text', '')}"


def block(summary: str, lines: Iterable[str]) -> str:
    """``summary`` (no memory text in it), then the memories as a data block."""
    return f"{summary}\n{render_data_block(list(lines), 'memory')}"


def recall_text(data: Mapping[str, Any]) -> str:
    hits = data.get("results", [])
    lines = [memory_line(h["memory"], f" score={h.get('score')}") for h in hits]
    meta = json.dumps(data.get("meta", {}), ensure_ascii=False, separators=(",", ":"))
    return block(f"{len(hits)} memories recalled; meta: {meta}", lines)


def items_text(data: Mapping[str, Any], key: str = "items") -> str:
    items = data.get(key, [])
    cursor = data.get("next_cursor")
    more = f"; next_cursor: {cursor}" if cursor else ""
    return block(f"{len(items)} memories{more}", (memory_line(m) for m in items))


def memory_text(data: Mapping[str, Any]) -> str:
    return block("1 memory", [memory_line(data)])


def snapshot_text(data: Mapping[str, Any]) -> str:
    lines = []
    withheld = []
    for member in data.get("members", []):
        if member.get("memory") is None:
            withheld.append(f"{member['id']} v{member['version']}: {member['withheld']}")
        else:
            lines.append(memory_line(member["memory"]))
    summary = f"snapshot {data.get('snapshot_id')}: {len(lines)} members readable"
    if withheld:
        summary += "; withheld: " + ", ".join(withheld)
    return block(summary, lines)
