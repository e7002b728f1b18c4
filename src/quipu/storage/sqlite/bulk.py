"""Whole-store work on SQLite (a mixin of :class:`~quipu.storage.sqlite.store.SQLiteStore`):
verbatim import and streaming export of versions, and recomputing every stored BM25 key when
the tokenizer changed since they were written."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager

import numpy as np

from quipu.core.auth import Actor
from quipu.core.lifecycle import LIVE
from quipu.core.records import MemoryVersion, ScopeRef
from quipu.core.text import embedding_key as text_embedding_key
from quipu.core.versions import import_order, valid_to
from quipu.retrieval.bm25 import (
    TOKENIZER_VERSION,
    SessionContext,
    document_tokens,
    indexed_keys,
)
from quipu.storage.admission import admit_versions
from quipu.storage.base import Vector
from quipu.storage.decode import decode_row
from quipu.storage.sqlite.rows import COLUMNS, lenient_text, to_record
from quipu.storage.sqlite.scope_index import ScopeIndex
from quipu.storage.timecodec import from_micros_opt, to_micros_opt


class BulkTables:
    """Needs ``_tx()``, ``_connect()``, ``_write_version()`` and ``_bump()`` from the store, which
    sets the index attributes below."""

    _index_lock: threading.Lock
    _indexes: OrderedDict[ScopeRef, ScopeIndex]

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _connect(self) -> sqlite3.Connection:
        raise NotImplementedError

    def _write_version(
        self,
        c: sqlite3.Connection,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        by: Actor | None,
    ) -> tuple[int, list[str]]:
        raise NotImplementedError

    def _bump(self, c: sqlite3.Connection, ref: ScopeRef, live_delta: int) -> int:
        raise NotImplementedError

    def _refresh_terms(self) -> None:
        """Recompute stored BM25 keys when the tokenizer changed since they were written."""
        with self._tx() as c:
            row = c.execute("SELECT value FROM store_meta WHERE key = 'terms_version'").fetchone()
            if row is not None and row[0] == TOKENIZER_VERSION:
                return
            rows = c.execute(
                "SELECT key, tenant_id, scope, owner, json_extract(provenance, '$.session_id'),"
                " id, text, aliases, observed_at FROM memory_versions ORDER BY key"
            ).fetchall()
            chain = SessionContext()
            updates = []
            for key, tenant, scope, owner, session, family, text, aliases, at in rows:
                own = document_tokens(text, json.loads(aliases), from_micros_opt(at))
                where = None if session is None else (tenant, scope, owner, session)
                context = chain.next(where, family, own)
                updates.append((" ".join(indexed_keys(own, context)), key))
            c.executemany("UPDATE memory_versions SET terms = ? WHERE key = ?", updates)
            c.execute(
                "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('terms_version', ?)",
                (TOKENIZER_VERSION,),
            )

    def import_versions(self, items: Iterable[tuple[MemoryVersion, Vector | None]]) -> int:
        items = admit_versions(items)
        planned = import_order(items)
        written = 0
        with self._tx() as c:
            for memory, vector, successor in planned:
                exists = c.execute(
                    "SELECT 1 FROM memory_versions WHERE tenant_id = ? AND id = ? AND version = ?",
                    (memory.tenant_id, memory.id, memory.version),
                ).fetchone()
                if exists:
                    continue
                ref = ScopeRef(memory.tenant_id, memory.scope, memory.owner)
                key_text = text_embedding_key(memory.text) if vector is not None else None
                key, _ = self._write_version(c, ref, memory, vector, key_text, None)
                end = valid_to(memory, successor) if successor else memory.invalid_at
                c.execute(
                    "UPDATE memory_versions SET valid_to = ? WHERE key = ?",
                    (to_micros_opt(end), key),
                )
                live = int(memory.is_current and memory.status in LIVE)
                self._bump(c, ref, live)
                written += 1
            with self._index_lock:
                self._indexes.clear()
        return written

    def export_versions(
        self, tenant_id: str | None
    ) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        conn = self._connect()
        conn.text_factory = lenient_text  # an export never stops at a row another tool wrote
        try:
            where, params = ("WHERE tenant_id = ?", (tenant_id,)) if tenant_id else ("", ())
            for r in conn.execute(
                f"SELECT {COLUMNS}, vector FROM memory_versions {where}"
                " ORDER BY tenant_id, id, version",
                params,
            ):
                memory = decode_row(to_record, r, r["key"])
                if memory is None:
                    continue
                blob = r["vector"]
                vector = None if blob is None else np.frombuffer(blob, dtype=np.float32).copy()
                yield memory, vector
        finally:
            conn.close()
