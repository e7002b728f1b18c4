"""Batch insert on SQLite (a mixin of :class:`SQLiteStore`; issue 24, promotion cost): every
row of a batch written as :meth:`SQLiteStore.insert` writes it, inside one ``BEGIN IMMEDIATE``
transaction (or the caller's open ``transaction()``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager

from quipu.core.auth import Actor
from quipu.core.graph import GraphDraft
from quipu.core.records import MemoryVersion, ScopeRef, WriteResult
from quipu.errors import LimitExceeded
from quipu.retrieval.bm25 import document_tokens
from quipu.storage.admission import admit
from quipu.storage.base import Vector
from quipu.storage.batch import BatchOutcome, BatchRow


class BatchTables:
    """Needs the store's ``_tx()`` and ``_insert()``."""

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _insert(
        self,
        c: sqlite3.Connection,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        quota: int,
        by: Actor,
        graph: GraphDraft | None,
        context: list[str] | None = None,
    ) -> WriteResult:
        raise NotImplementedError

    def insert_batch(
        self, ref: ScopeRef, rows: Sequence[BatchRow], quota: int, *, by: Actor
    ) -> list[BatchOutcome]:
        for row in rows:  # every row admitted before the transaction opens (SAFE-1)
            admit(row.memory)
        out: list[BatchOutcome] = []
        last: MemoryVersion | None = None  # the batch's row written last
        with self._tx() as c:
            for row in rows:
                session = row.memory.provenance.session_id
                context = None  # the store reads it: the row before is not the batch's
                if last is not None and session is not None:
                    # the session's memory written last is the batch's previous row: its
                    # tokens, instead of a scan of the scope for it (one per row)
                    same = last.provenance.session_id == session
                    context = (
                        document_tokens(last.text, last.aliases, last.observed_at) if same else None
                    )
                try:
                    written = self._insert(
                        c,
                        ref,
                        row.memory,
                        row.vector,
                        row.embedding_key,
                        quota,
                        by,
                        row.graph,
                        context,
                    )
                except LimitExceeded as exc:  # checked before the row writes anything
                    out.append(exc)
                    continue
                if written.created:
                    last = written.memory
                out.append(written)
        return out
