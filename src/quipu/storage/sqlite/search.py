"""Search on SQLite (a mixin of :class:`~quipu.storage.sqlite.store.SQLiteStore`): an
in-process :class:`ScopeIndex` per scope, loaded on first use, kept current by this process's
own writes and brought up to date from ``scope_log`` when another process wrote; evicted least
recently used past ``cache_rows`` rows or ``cache_bytes`` bytes. Vector kNN, BM25, key
frequencies, sessions and similarities of a scope are all answered from it."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quipu.core.query import Candidate, Filters
from quipu.core.records import MemoryVersion, ScopeRef
from quipu.retrieval.bm25 import TOKENIZER_VERSION
from quipu.retrieval.expansion import query_keys
from quipu.storage.base import EmbeddingPin, SearchInfo, Vector
from quipu.storage.sqlite import index_file
from quipu.storage.sqlite.rows import fetch_all
from quipu.storage.sqlite.scope_index import (
    KIND_BY_NAME,
    SOURCE_BY_NAME,
    STATUS_BY_NAME,
    IndexState,
    Row,
    ScopeIndex,
)
from quipu.storage.timecodec import to_micros, to_micros_opt

log = logging.getLogger("quipu.storage")

#: A scope's index file this many generations behind is rewritten once caught up, so the next
#: process replays less of ``scope_log`` (which keeps 1,024 generations).
_REWRITE_BEHIND = 256


class ScopeSearch:
    """Needs ``_reader()``, ``embedding_pin()`` and ``load()`` from the store, which sets the
    attributes below in its constructor."""

    _index_lock: threading.Lock
    _indexes: OrderedDict[ScopeRef, ScopeIndex]
    _cache_rows: int
    _cache_bytes: int
    _index_folder: Path | None
    rebuilds: int
    catch_ups: int
    mapped: int

    _id: str | None

    def _store_id(self) -> str:
        """This store's random id (migration 0052), which its index files carry."""
        if self._id is None:
            row = self._reader().execute("SELECT value FROM store_meta WHERE key = 'store_id'")
            self._id = str(row.fetchone()[0])
        return self._id

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def embedding_pin(self) -> EmbeddingPin | None:
        raise NotImplementedError

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]:
        raise NotImplementedError

    # -- searches ----------------------------------------------------------------------------
    def vector_candidates(
        self, ref: ScopeRef, vector: Vector, filters: Filters, limit: int
    ) -> tuple[list[Candidate], SearchInfo]:
        index = self._index(ref)
        found, scanned, path = index.search(vector, filters, limit, now_micros())
        return found, SearchInfo(path, scanned)

    def scope_vectors(self, ref: ScopeRef) -> npt.NDArray[np.float32]:
        """A copy of the scope's vectors as the index holds them (``quipu bench scale``'s numpy
        floor scans the very same matrix)."""
        index = self._index(ref)
        with index.lock:
            n = len(index)
            return index.vectors.take(np.flatnonzero(index.has_vec[:n]))

    def text_candidates(
        self, ref: ScopeRef, query: str, filters: Filters, limit: int, *, expansion: float = 0.0
    ) -> tuple[list[Candidate], SearchInfo]:
        index = self._index(ref)
        keys = query_keys(query, expansion)
        found, scanned, path = index.search_text(keys, filters, limit, now_micros())
        return found, SearchInfo(path, scanned)

    def key_frequencies(self, ref: ScopeRef, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self._index(ref).key_frequencies(keys)  # the postings BM25 reads

    def sessions_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, str]:
        return self._index(ref).sessions_of(keys)  # held in memory with the scope

    def vectors_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, Vector]:
        index = self._index(ref)  # the scope's vectors are in memory already
        out: dict[int, Vector] = {}
        for key in keys:
            vector = index.vector_of(key)
            if vector is not None:
                out[key] = vector
        return out

    def similarities(self, ref: ScopeRef, keys: Sequence[int], vector: Vector) -> dict[int, float]:
        query = np.ascontiguousarray(vector, dtype=np.float32)
        return self._index(ref).similarities(keys, query)

    # -- cache upkeep ------------------------------------------------------------------------
    def _cache_add(
        self,
        ref: ScopeRef,
        generation: int,
        key: int,
        memory: MemoryVersion,
        previous_key: int | None,
        vector: Vector | None,
        terms: list[str],
    ) -> None:
        with self._index_lock:
            index = self._indexes.get(ref)
        if index is None:
            return
        with index.lock:
            if index.generation != generation - 1:
                return  # another process wrote in between: the next read replays the log
            add_version(index, key, memory, previous_key, vector, terms)
            index.generation = generation

    def _cache_retire(self, ref: ScopeRef, key: int, end: datetime | None) -> None:
        with self._index_lock:
            index = self._indexes.get(ref)
        if index is not None:
            index.retire(key, to_micros_opt(end))

    def _index(self, ref: ScopeRef) -> ScopeIndex:
        pin = self.embedding_pin()
        conn = self._reader()
        generation = _generation(conn, ref)
        with self._index_lock:
            index = self._indexes.get(ref)
            if (
                index is not None
                and index.generation < generation
                and not self._catch_up(conn, ref, pin, index, generation)
            ):
                index = None
            if index is not None:
                self._indexes.move_to_end(ref)
                return index
            index = self._from_file(conn, ref, pin, generation)
            if index is None:
                index = self._build(conn, ref, pin)
                self.rebuilds += 1
                self._to_file(conn, ref, pin, index)
            self._indexes[ref] = index
            self._evict()
            return index

    # -- index files (issue 23) --------------------------------------------------------------
    def _origin(self, ref: ScopeRef, pin: EmbeddingPin | None) -> index_file.Origin:
        return index_file.Origin(
            store_id=self._store_id(),
            tenant_id=ref.tenant_id,
            scope=ref.scope.value,
            owner=ref.owner,
            model=pin.model_id if pin else "",
            dimension=pin.dimension if pin else 0,
            tokenizer=TOKENIZER_VERSION,
        )

    def _from_file(
        self, conn: sqlite3.Connection, ref: ScopeRef, pin: EmbeddingPin | None, generation: int
    ) -> ScopeIndex | None:
        """The scope's index mapped from its file, brought up to ``generation``; ``None`` when
        there is no usable file (then the caller loads the scope from the database)."""
        if self._index_folder is None:
            return None
        path = index_file.file_for(self._index_folder, ref)
        state = index_file.read(path, self._origin(ref, pin))
        if state is None or state.generation > generation or not _same_last(conn, ref, state):
            return None
        index = ScopeIndex.from_state(state)
        behind = generation - index.generation
        if behind and not self._catch_up(conn, ref, pin, index, generation):
            return None
        self.mapped += 1
        if behind > _REWRITE_BEHIND:
            self._to_file(conn, ref, pin, index)
        return index

    def _to_file(
        self,
        conn: sqlite3.Connection,
        ref: ScopeRef,
        pin: EmbeddingPin | None,
        index: ScopeIndex,
    ) -> None:
        """Write the scope's index for the next process; a folder that cannot be written
        leaves every process loading the scope itself (logged, not raised). Not when the scope
        moved on while it loaded: an erase in between must not see its rows written back."""
        if self._index_folder is None or _generation(conn, ref) != index.generation:
            return
        path = index_file.file_for(self._index_folder, ref)
        try:
            index_file.write(path, self._origin(ref, pin), index.state())
        except OSError as exc:
            log.warning("could not write the scope index file %s: %s", path, exc)

    def _forget_file(self, ref: ScopeRef) -> None:
        """Delete the scope's index file (an erasure: no erased term may stay on disk)."""
        if self._index_folder is not None:
            index_file.remove(index_file.file_for(self._index_folder, ref))

    def _catch_up(
        self,
        conn: sqlite3.Connection,
        ref: ScopeRef,
        pin: EmbeddingPin | None,
        index: ScopeIndex,
        generation: int,
    ) -> bool:
        """Replay what other processes wrote to this scope since ``index`` was current
        (``scope_log``), as this process's own writes would have applied it. False when the
        log does not cover every generation since (pruned, or a bulk import): reload instead."""
        params = (ref.tenant_id, ref.scope.value, ref.owner)
        entries = conn.execute(
            "SELECT generation, added, retired FROM scope_log WHERE tenant_id = ? AND scope = ?"
            " AND owner = ? AND generation > ? ORDER BY generation",
            (*params, index.generation),
        ).fetchall()
        steps = [int(e[0]) for e in entries]
        if steps != list(range(index.generation + 1, index.generation + 1 + len(steps))):
            return False
        if not steps or steps[-1] < generation:
            return False
        keys = [int(e[1]) for e in entries] + [int(e[2]) for e in entries if e[2] is not None]
        marks = ",".join("?" * len(keys))
        rows = {
            int(r[0]): r
            for r in conn.execute(
                f"SELECT key, valid_to, terms, CASE WHEN embedding_model = ? THEN vector END"
                f" FROM memory_versions WHERE key IN ({marks})",
                (pin.model_id if pin else "", *keys),
            )
        }
        added = self.load([int(e[1]) for e in entries])
        if any(k not in rows for k in keys) or any(int(e[1]) not in added for e in entries):
            return False
        with index.lock:
            for _, key, retired in entries:
                memory = added[int(key)]
                if retired is not None:
                    index.retire(int(retired), rows[int(retired)][1])
                _, _, terms, blob = rows[int(key)]
                vector = None if blob is None else np.frombuffer(blob, dtype=np.float32)
                previous = None if retired is None else int(retired)
                add_version(index, int(key), memory, previous, vector, (terms or "").split())
            index.generation = steps[-1]
        self.catch_ups += 1
        return True

    def _build(
        self, conn: sqlite3.Connection, ref: ScopeRef, pin: EmbeddingPin | None
    ) -> ScopeIndex:
        """Load a scope into a fresh index; columns in ``scope_index.BULK_COLUMNS`` order. The
        rows and their generation are read in one transaction, so an index (and the file
        written from it) never labels rows with a generation they are not of."""
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            found = conn.execute(
                "SELECT generation FROM scope_state WHERE tenant_id = ? AND scope = ?"
                " AND owner = ?",
                (ref.tenant_id, ref.scope.value, ref.owner),
            ).fetchone()
            rows = fetch_all(
                conn,
                "SELECT key, id, is_current, status, valid_at, valid_to, observed_at, kind,"
                " source, confidence, project, terms, json_extract(provenance, '$.session_id'),"
                " CASE WHEN embedding_model = ? THEN vector END"
                " FROM memory_versions"
                " WHERE tenant_id = ? AND scope = ? AND owner = ? ORDER BY key",
                (pin.model_id if pin else "", ref.tenant_id, ref.scope.value, ref.owner),
            )
        finally:
            if own:
                conn.execute("COMMIT")
        index = ScopeIndex(pin.dimension if pin else 0, int(found[0]) if found else 0)
        index.bulk_load([row for row in rows if _indexable(row)])
        return index

    def _evict(self) -> None:
        """Drop the least recently used scope indexes past ``cache_rows`` rows or
        ``cache_bytes`` bytes (the one used last is kept)."""
        total = sum(len(i) for i in self._indexes.values())
        size = sum(i.nbytes() for i in self._indexes.values())
        while (total > self._cache_rows or size > self._cache_bytes) and len(self._indexes) > 1:
            _, dropped = self._indexes.popitem(last=False)
            total -= len(dropped)
            size -= dropped.nbytes()


def _generation(conn: sqlite3.Connection, ref: ScopeRef) -> int:
    row = conn.execute(
        "SELECT generation FROM scope_state WHERE tenant_id = ? AND scope = ? AND owner = ?",
        (ref.tenant_id, ref.scope.value, ref.owner),
    ).fetchone()
    return int(row[0]) if row else 0


def _same_last(conn: sqlite3.Connection, ref: ScopeRef, state: IndexState) -> bool:
    """Whether the last row of a file's index is still the same version of the same scope in
    the database (not so after a backup was restored over the file's store)."""
    keys = state.columns["keys"]
    if keys.shape[0] == 0:
        return True
    last = int(keys[-1])
    row = conn.execute(
        "SELECT id FROM memory_versions WHERE key = ? AND tenant_id = ? AND scope = ?"
        " AND owner = ?",
        (last, ref.tenant_id, ref.scope.value, ref.owner),
    ).fetchone()
    family = state.families[int(state.columns["family"][-1])]
    return row is not None and row[0] == family


def add_version(
    index: ScopeIndex,
    key: int,
    memory: MemoryVersion,
    previous_key: int | None,
    vector: Vector | None,
    terms: list[str],
) -> None:
    """Add a written version to ``index`` (this process's write, or one replayed from
    ``scope_log``); a version given no vector keeps the one of the version it replaces."""
    if vector is None and previous_key is not None:
        vector = index.vector_of(previous_key)
    index.add(_row(key, memory, memory.invalid_at, terms), vector)


def _row(key: int, m: MemoryVersion, end: datetime | None, terms: list[str]) -> Row:
    return Row(
        key=key,
        family=m.id,
        version=m.version,
        is_current=m.is_current,
        status=m.status,
        valid_at=to_micros(m.valid_at),
        valid_to=to_micros_opt(end),
        observed_at=to_micros_opt(m.observed_at),
        kind=m.kind,
        source=m.source,
        confidence=m.confidence,
        project=m.project,
        terms=terms,
        session=m.provenance.session_id,
    )


def now_micros() -> int:
    return to_micros(datetime.now(UTC))


def _indexable(row: sqlite3.Row) -> bool:
    """Whether a stored row can enter the index: a status, kind and source this version knows
    and numeric times and confidence. Another tool's malformed row is left out, logged."""
    known = (
        row[3] in STATUS_BY_NAME
        and row[7] in KIND_BY_NAME
        and row[8] in SOURCE_BY_NAME
        and isinstance(row[4], int)
        and isinstance(row[9], int | float)
    )
    if not known:
        log.warning("left stored row %s out of the search index: it cannot be read", row[0])
    return known
