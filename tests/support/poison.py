"""Rows no check would let in, written straight into a store's tables (as rows written before
the write boundary existed, or by another tool): for tests that reads survive them (issue 20)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from quipu.core.records import MemoryVersion


def store_raw(store: Any, memory: MemoryVersion) -> None:
    """Store ``memory`` as it is, lone surrogates in its tags and metadata included: imported
    clean, then its JSON columns rewritten with the escapes (``json.dumps`` writes a lone
    surrogate as ``\\udXXX``, which both backends' JSON columns accept)."""
    clean = dataclasses.replace(memory, tags=(), metadata={})
    assert store.import_versions([(clean, None)]) == 1
    tags, metadata = json.dumps(list(memory.tags)), json.dumps(memory.metadata)
    if hasattr(store, "_writer"):  # SQLite
        store._writer.execute(
            "UPDATE memory_versions SET tags = ?, metadata = ? WHERE id = ?",
            (tags, metadata, memory.id),
        )
        store._writer.commit()
        with store._index_lock:
            store._indexes.clear()
        return
    with store._tx() as conn:  # PostgreSQL: tags is text[], which holds only valid text
        conn.execute(
            "UPDATE memory_versions SET metadata = %s::json WHERE id = %s", (metadata, memory.id)
        )
