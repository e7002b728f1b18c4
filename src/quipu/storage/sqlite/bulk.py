"""Whole-store work on SQLite (a mixin of :class:`~quipu.storage.sqlite.store.SQLiteStore`):
verbatim import and streaming export of versions, and recomputing every stored BM25 key when
the tokenizer changed since they were written."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager

import numpy as np

from quipu.core.auth import Actor
from quipu.core.lifecycle import LIVE
from quipu.core.records import MemoryVersion, Scope, ScopeRef
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
    """Needs ``_tx()``, ``_connect()``, ``_reader()``, ``_write_version()`` and ``_bump()``
    from the store, which sets the index attributes below."""

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

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    # -- vectors written after the fact (a model that was down at write time) ---------------
    def missing_vectors(self, limit: int) -> list[tuple[int, str, str]]:
        rows = (
            self._reader()
            .execute(
                "SELECT key, tenant_id, text FROM memory_versions WHERE embedding_key IS NULL"
                " AND is_current = 1 ORDER BY key LIMIT ?",
                (limit,),
            )
            .fetchall()
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def attach_vectors(self, model_id: str, items: Sequence[tuple[int, str, Vector]]) -> None:
        attached: dict[ScopeRef, list[tuple[int, Vector]]] = {}
        with self._tx() as c:
            for key, emb_key, vector in items:
                row = c.execute(
                    "UPDATE memory_versions SET embedding_key = ?, embedding_model = ?, vector = ?"
                    " WHERE key = ? RETURNING tenant_id, scope, owner",
                    (emb_key, model_id, np.asarray(vector, dtype=np.float32).tobytes(), key),
                ).fetchone()
                if row is not None:
                    attached.setdefault(ScopeRef(row[0], Scope(row[1]), row[2]), []).append(
                        (key, vector)
                    )
            # A new generation with no scope_log entry: other processes' indexes of the scope
            # see a gap and reload it, so none keeps answering without the new vectors.
            generations = {ref: self._bump(c, ref, 0) for ref in attached}
        for ref, vectors in attached.items():
            with self._index_lock:
                index = self._indexes.get(ref)
            if index is None:
                continue
            with index.lock:
                for key, vector in vectors:
                    index.set_vector(key, vector)
                if index.generation == generations[ref] - 1:
                    index.generation = generations[ref]

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
