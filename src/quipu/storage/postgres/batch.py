"""Batch insert on PostgreSQL (a mixin of :class:`PostgresStore`; issue 24, promotion cost):
every row of a batch written by :meth:`PostgresStore.insert` on one connection, inside one
transaction (the caller's open ``transaction()``, or one opened here); each row's conditional
insert is a savepoint in it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from quipu.core.auth import Actor
from quipu.core.graph import GraphDraft
from quipu.core.records import MemoryVersion, ScopeRef, WriteResult
from quipu.errors import LimitExceeded
from quipu.storage.admission import admit
from quipu.storage.base import Vector
from quipu.storage.batch import BatchOutcome, BatchRow
from quipu.storage.joined import join, joined_to


class BatchTables:
    """Needs the store's ``_conn()`` and ``insert()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def insert(
        self,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        quota: int,
        *,
        by: Actor,
        graph: GraphDraft | None = None,
    ) -> WriteResult:
        raise NotImplementedError

    def insert_batch(
        self, ref: ScopeRef, rows: Sequence[BatchRow], quota: int, *, by: Actor
    ) -> list[BatchOutcome]:
        for row in rows:  # every row admitted before the transaction opens (SAFE-1)
            admit(row.memory)
        if joined_to(self) is not None:
            return list(self._each(ref, rows, quota, by))
        with self._conn() as conn, conn.transaction(), join(self, conn):
            return list(self._each(ref, rows, quota, by))

    def _each(
        self, ref: ScopeRef, rows: Sequence[BatchRow], quota: int, by: Actor
    ) -> Iterator[BatchOutcome]:
        for row in rows:
            try:
                yield self.insert(
                    ref, row.memory, row.vector, row.embedding_key, quota, by=by, graph=row.graph
                )
            except LimitExceeded as exc:
                yield exc
