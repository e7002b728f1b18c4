"""JSON Lines export and import (API-4): lossless, versions, times, provenance and vectors.

Line 1 is a header; every later line is one version. Vectors travel as base64 float32 with
the id of the model that made them, so an import into a store pinned to another model simply
leaves them out (and the rows are re-embedded later) instead of mixing spaces.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np

from quipu.core.records import (
    MemoryVersion,
)
from quipu.errors import InvalidInput
from quipu.storage.base import Vector

FORMAT = "quipu-export"
FORMAT_VERSION = 1


def header() -> dict[str, Any]:
    return {"type": "header", "format": FORMAT, "version": FORMAT_VERSION}


def encode(memory: MemoryVersion, vector: Vector | None) -> dict[str, Any]:
    row = memory.to_dict()
    row.update(type="version", tenant_id=memory.tenant_id, owner=memory.owner)
    row["vector"] = (
        None
        if vector is None
        else base64.b64encode(np.asarray(vector, np.float32).tobytes()).decode()
    )
    return row


def decode(row: dict[str, Any]) -> tuple[MemoryVersion, Vector | None]:
    try:
        memory = MemoryVersion.from_dict(
            row, tenant_id=str(row["tenant_id"]), owner=str(row["owner"])
        )
        blob = row.get("vector")
        vector = None if blob is None else np.frombuffer(base64.b64decode(blob), dtype=np.float32)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"an export line is malformed: {exc}",
            code="invalid_export",
            details={"id": row.get("id")},
        ) from None
    return memory, vector


def write(out: IO[str], items: Iterable[tuple[MemoryVersion, Vector | None]]) -> Iterator[int]:
    """Write the header and each version; yields after each line so callers can show progress."""
    out.write(json.dumps(header()) + "\n")
    for n, (memory, vector) in enumerate(items, start=1):
        out.write(json.dumps(encode(memory, vector), ensure_ascii=False) + "\n")
        yield n


def read(lines: Iterable[str]) -> Iterator[tuple[MemoryVersion, Vector | None]]:
    """Parse an export; the header must come first and name this format."""
    it = iter(lines)
    first = next(it, "")
    try:
        head = json.loads(first) if first.strip() else {}
    except json.JSONDecodeError:
        head = {}
    if head.get("format") != FORMAT or head.get("version") != FORMAT_VERSION:
        raise InvalidInput("not a Quipu export (missing or unknown header)", code="invalid_export")
    for number, line in enumerate(it, start=2):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise InvalidInput(
                f"line {number} of the export is not JSON", code="invalid_export"
            ) from None
        if not isinstance(row, dict) or row.get("type") != "version":
            raise InvalidInput(f"line {number} is not a version row", code="invalid_export")
        yield decode(row)
