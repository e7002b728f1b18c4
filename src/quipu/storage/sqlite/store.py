"""The SQLite backend: one file, WAL, one writer (``BEGIN IMMEDIATE``), many readers.

Vectors are float32 blobs on each version row. Search runs on an in-process :class:`ScopeIndex` per
scope (exact cosine and BM25 with the scope's own statistics), loaded on first use and kept
current by this process's own writes. A ``generation`` per scope tells the cache when another
process wrote, and ``scope_log`` what it wrote: the cache replays those generations instead of
reloading the scope (a 10k-row scope took ~0.1 s to reload on 2 cores).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np

from quipu.core.auth import Actor, version_audit
from quipu.core.graph import GraphDraft
from quipu.core.lifecycle import LIVE
from quipu.core.query import Cursor, Filters, Page
from quipu.core.records import (
    MemoryVersion,
    Relation,
    Scope,
    ScopeRef,
    Status,
    WriteResult,
)
from quipu.core.text import fold
from quipu.core.versions import UNSET, Change, check_expected, next_version, valid_to
from quipu.errors import Conflict, LimitExceeded, NotFound, closed_store
from quipu.retrieval.bm25 import document_tokens, indexed_keys
from quipu.storage.admission import admit
from quipu.storage.base import Capabilities, EmbeddingPin, Vector
from quipu.storage.decode import decode_row, decode_rows
from quipu.storage.graph_rows import same_text
from quipu.storage.joined import joined_to
from quipu.storage.sqlite.batch import BatchTables
from quipu.storage.sqlite.bulk import BulkTables
from quipu.storage.sqlite.control import ControlTables, insert_audit
from quipu.storage.sqlite.documents import DocumentTables
from quipu.storage.sqlite.governance import GovernanceTables
from quipu.storage.sqlite.graph import GraphTables, mirror_in
from quipu.storage.sqlite.graph_links import GraphLinkReads
from quipu.storage.sqlite.graph_reads import GraphReads
from quipu.storage.sqlite.idempotency import IdempotencyTables
from quipu.storage.sqlite.index import IndexTables
from quipu.storage.sqlite.knowledge import KnowledgeTables
from quipu.storage.sqlite.knowledge_candidates import CandidateTables
from quipu.storage.sqlite.knowledge_shown import ShownTables
from quipu.storage.sqlite.kv import KVTables
from quipu.storage.sqlite.listing import list_where
from quipu.storage.sqlite.migrate import migrate
from quipu.storage.sqlite.placement import PlacementTables
from quipu.storage.sqlite.portable import PortableTables
from quipu.storage.sqlite.rows import (
    COLUMNS,
    INSERT_SQL,
    fetch_all,
    to_params,
    to_record,
)
from quipu.storage.sqlite.scope_index import ScopeIndex
from quipu.storage.sqlite.search import ScopeSearch
from quipu.storage.sqlite.sessions_view import SessionViews
from quipu.storage.sqlite.work import WorkTables
from quipu.storage.timecodec import from_micros_opt, to_micros_opt

_LIVE = tuple(s.value for s in LIVE)
_CHUNK = 500
#: Generations of each scope kept in ``scope_log``; a process further behind reloads the scope.
_LOG_KEPT = 1024


class SQLiteStore(
    ScopeSearch,
    BatchTables,
    BulkTables,
    ControlTables,
    WorkTables,
    GovernanceTables,
    IdempotencyTables,
    PortableTables,
    KVTables,
    DocumentTables,
    KnowledgeTables,
    SessionViews,
    IndexTables,
    GraphTables,
    PlacementTables,
    GraphReads,
    GraphLinkReads,
    ShownTables,
    CandidateTables,
):
    """A Store over one SQLite file. Thread-safe; several processes may share the file."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 10.0,
        cache_rows: int = 2_000_000,
        index_files: bool = True,
        cache_bytes: int = 256 << 20,
    ):
        self.path = str(path)
        #: Where scope indexes are kept for other processes to map (``index_file``).
        self._index_folder = (
            Path(self.path + "-index") if index_files and self.path != ":memory:" else None
        )
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._timeout = busy_timeout
        self._cache_rows = cache_rows
        self._cache_bytes = cache_bytes  # the scope indexes kept, by their nbytes() (issue 23)
        #: Scope indexes loaded whole, and brought up to date from ``scope_log`` (diagnostics).
        self.rebuilds = 0
        self.catch_ups = 0
        self.mapped = 0  # scope indexes mapped from their file instead
        self._id: str | None = None
        self._closed = False
        self._write_lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._indexes: OrderedDict[ScopeRef, ScopeIndex] = OrderedDict()
        self._pin: EmbeddingPin | None = None
        self._writer = self._connect()
        migrate(self._writer)
        self._refresh_terms()
        self.capabilities = Capabilities(
            backend="sqlite",
            vector_search="exact-numpy",
            full_text="bm25-scope",
            sources=frozenset({"facts", "notes"}),
        )

    # -- connections -------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Freed cells and pages are zeroed, so an erased text leaves the file (LIFE-4).
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
        return conn

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise closed_store()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._index_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        joined = joined_to(self)  # inside transaction() (GRAPH-2): its connection, its commit
        if joined is not None:
            yield joined
            return
        if self._closed:
            raise closed_store()
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                self._drop_indexes()
                raise

    def _drop_indexes(self) -> None:
        """Forget this process's scope indexes (a rollback took back rows they may hold)."""
        with self._index_lock:
            self._indexes.clear()

    def close(self) -> None:
        self._closed = True
        with self._index_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._indexes.clear()
        self._writer.close()

    # -- embedding pin and cache -------------------------------------------------------------
    def embedding_pin(self) -> EmbeddingPin | None:
        if self._pin is not None:
            return self._pin
        rows = dict(
            self._reader()
            .execute("SELECT key, value FROM store_meta WHERE key LIKE 'embedding_%'")
            .fetchall()
        )
        if "embedding_model" not in rows:
            return None
        self._pin = EmbeddingPin(rows["embedding_model"], int(rows["embedding_dimension"]))
        return self._pin

    def pin_embedding(self, pin: EmbeddingPin) -> None:
        with self._tx() as c:
            rows = dict(c.execute("SELECT key, value FROM store_meta").fetchall())
            if "embedding_model" in rows:
                held = EmbeddingPin(rows["embedding_model"], int(rows["embedding_dimension"]))
                if held != pin:
                    raise Conflict(
                        f"this store's vectors were made by {held.model_id} ({held.dimension}-d); "
                        f"it cannot be opened with {pin.model_id} ({pin.dimension}-d) — "
                        "re-index it or use the original model",
                        code="embedding_model_mismatch",
                        details={"stored": held.model_id, "requested": pin.model_id},
                    )
                return
            c.executemany(
                "INSERT INTO store_meta (key, value) VALUES (?, ?)",
                [("embedding_model", pin.model_id), ("embedding_dimension", str(pin.dimension))],
            )

    def cached_embeddings(
        self, tenant_id: str, model_id: str, keys: Sequence[str]
    ) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        conn = self._reader()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _CHUNK):
            part = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(part))
            for key, blob in conn.execute(
                f"SELECT embedding_key, vector FROM memory_versions WHERE tenant_id = ?"
                f" AND embedding_key IN ({marks}) AND embedding_model = ? AND vector IS NOT NULL",
                (tenant_id, *part, model_id),
            ):
                out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    # -- writes ------------------------------------------------------------------------------
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
        admit(memory)
        with self._tx() as c:
            return self._insert(c, ref, memory, vector, embedding_key, quota, by, graph)

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
        """:meth:`insert` inside the caller's transaction (one row of a batch, too);
        ``context``: the session context's tokens when the caller knows them."""
        live = memory.status in LIVE
        if live:
            dup = c.execute(
                f"SELECT {COLUMNS} FROM memory_versions WHERE tenant_id = ? AND scope = ?"
                f" AND owner = ? AND content_hash = ? AND is_current = 1 AND project IS ?"
                f" AND status IN ({','.join('?' * len(_LIVE))}) LIMIT 1",
                (
                    ref.tenant_id,
                    ref.scope.value,
                    ref.owner,
                    memory.content_hash,
                    memory.project,
                    *_LIVE,
                ),
            ).fetchone()
            if dup is not None:
                return WriteResult(to_record(dup), created=False)
            count = self._live_count(c, ref)
            if count >= quota:
                raise LimitExceeded(
                    f"this scope owner already holds {count} live memories (quota {quota})",
                    code="quota_exceeded",
                    details={"quota": quota, "live": count},
                )
        key, terms = self._write_version(c, ref, memory, vector, embedding_key, by, context)
        mirror_in(c, ref, memory, graph, memory.recorded_at)  # GRAPH-1: same transaction
        generation = self._bump(c, ref, 1 if live else 0)
        self._log(c, ref, generation, key, None)
        self._cache_add(ref, generation, key, memory, None, vector, terms)
        return WriteResult(memory, created=True)

    def append(
        self,
        ref: ScopeRef,
        memory_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        now: datetime,
        quota: int,
        *,
        by: Actor,
        graph: GraphDraft | None = None,
    ) -> MemoryVersion:
        admit(change)
        with self._tx() as c:
            return self._append(
                c, ref, memory_id, change, expected_version, vector, embedding_key, now, quota, by,
                graph,
            )  # fmt: skip

    def supersede(
        self,
        ref: ScopeRef,
        old_id: str,
        new_id: str,
        change: Change,
        now: datetime,
        expected_version: int | None = None,
        *,
        by: Actor,
    ) -> MemoryVersion:
        admit(change)
        with self._tx() as c:
            if self._current_row(c, ref, new_id) is None:
                raise NotFound(f"no memory {new_id}", details={"id": new_id})
            return self._supersede(c, ref, old_id, new_id, change, now, expected_version, by)

    def _supersede(
        self,
        c: sqlite3.Connection,
        ref: ScopeRef,
        old_id: str,
        new_id: str,
        change: Change,
        now: datetime,
        expected_version: int | None,
        by: Actor,
    ) -> MemoryVersion:
        """``old_id`` superseded by ``new_id``, and ``new_id`` stamped ``supersedes`` (MEM-3)."""
        old = replace(
            change,
            status=Status.SUPERSEDED,
            invalid_at=now if change.invalid_at in (UNSET, None) else change.invalid_at,
            related_id=new_id,
            relation=Relation.SUPERSEDED_BY,
        )
        done = self._append(c, ref, old_id, old, expected_version, None, None, now, 2**62, by)
        stamp = Change(
            actor=change.actor,
            relation=Relation.SUPERSEDES,
            reason=change.reason,
            related_id=old_id,
        )
        self._append(c, ref, new_id, stamp, None, None, None, now, 2**62, by)
        return done

    def _append(
        self,
        c: sqlite3.Connection,
        ref: ScopeRef,
        memory_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        now: datetime,
        quota: int,
        by: Actor,
        graph: GraphDraft | None = None,
    ) -> MemoryVersion:
        row = self._current_row(c, ref, memory_id)
        if row is None:
            raise NotFound(f"no memory {memory_id}", details={"id": memory_id})
        current = to_record(row)
        check_expected(current, expected_version)
        new = next_version(current, change, now)
        was_live, is_live = current.status in LIVE, new.status in LIVE
        if is_live and not was_live:
            count = self._live_count(c, ref)
            if count >= quota:
                raise LimitExceeded(
                    f"this scope owner already holds {count} live memories (quota {quota})",
                    code="quota_exceeded",
                    details={"quota": quota, "live": count},
                )
        end = valid_to(current, new)
        c.execute(
            "UPDATE memory_versions SET is_current = 0, valid_to = ? WHERE key = ?",
            (to_micros_opt(end), row["key"]),
        )
        c.execute("DELETE FROM memory_aliases WHERE key = ?", (row["key"],))
        if new.text == current.text:
            embedding_key = row["embedding_key"]
            blob = row["vector"]
            vector = None if blob is None else np.frombuffer(blob, dtype=np.float32)
            new = replace(new, embedding_model=current.embedding_model)
        key, terms = self._write_version(c, ref, new, vector, embedding_key, by)
        mirror_in(c, ref, new, same_text(graph, current, new), now)  # GRAPH-1
        generation = self._bump(c, ref, int(is_live) - int(was_live))
        self._log(c, ref, generation, key, row["key"])
        self._cache_retire(ref, row["key"], end)
        self._cache_add(ref, generation, key, new, row["key"], vector, terms)
        return new

    def _write_version(
        self,
        c: sqlite3.Connection,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        by: Actor | None,
        context: list[str] | None = None,
    ) -> tuple[int, list[str]]:
        """Insert one version row, with its audit line naming ``by`` (none for a verbatim
        import, which the service audits as one event); returns its key and BM25 keys.
        ``context``: the tokens :meth:`_context_terms` would read, when the caller has them."""
        blob = None
        if vector is not None and embedding_key is not None and memory.embedding_model:
            blob = np.asarray(vector, dtype=np.float32).tobytes()
        else:
            embedding_key = None
        terms = indexed_keys(
            document_tokens(memory.text, memory.aliases, memory.observed_at),
            self._context_terms(c, ref, memory) if context is None else context,
        )
        cursor = c.execute(INSERT_SQL, to_params(memory, embedding_key, blob, terms))
        key = cursor.lastrowid
        assert key is not None
        if by is not None:
            insert_audit(c, version_audit(memory, by))
        if memory.is_current:
            c.executemany(
                "INSERT OR IGNORE INTO memory_aliases (tenant_id, scope, owner, folded, key)"
                " VALUES (?, ?, ?, ?, ?)",
                [(ref.tenant_id, ref.scope.value, ref.owner, fold(a), key) for a in memory.aliases],
            )
        return key, terms

    def _context_terms(
        self, c: sqlite3.Connection, ref: ScopeRef, memory: MemoryVersion
    ) -> list[str]:
        """The own BM25 keys of the memory written last in the same session and scope, from
        another family (``SessionContext`` gives refreshes and imports the same rule)."""
        session = memory.provenance.session_id
        if session is None:
            return []
        row = c.execute(
            "SELECT text, aliases, observed_at FROM memory_versions WHERE tenant_id = ?"
            " AND scope = ? AND owner = ? AND json_extract(provenance, '$.session_id') = ?"
            " AND id != ? ORDER BY key DESC LIMIT 1",
            (ref.tenant_id, ref.scope.value, ref.owner, session, memory.id),
        ).fetchone()
        if row is None:
            return []
        return document_tokens(row[0], json.loads(row[1]), from_micros_opt(row[2]))

    def _bump(self, c: sqlite3.Connection, ref: ScopeRef, live_delta: int) -> int:
        row = c.execute(
            "INSERT INTO scope_state (tenant_id, scope, owner, live_count, generation)"
            " VALUES (?, ?, ?, ?, 1) ON CONFLICT (tenant_id, scope, owner) DO UPDATE SET"
            " live_count = live_count + excluded.live_count, generation = generation + 1"
            " RETURNING generation",
            (ref.tenant_id, ref.scope.value, ref.owner, live_delta),
        ).fetchone()
        return int(row[0])

    def _log(
        self, c: sqlite3.Connection, ref: ScopeRef, generation: int, added: int, retired: int | None
    ) -> None:
        """Record what ``generation`` changed, for other processes' indexes (``scope_log``),
        and forget generations older than the last :data:`_LOG_KEPT`."""
        params = (ref.tenant_id, ref.scope.value, ref.owner)
        c.execute(
            "INSERT INTO scope_log (tenant_id, scope, owner, generation, added, retired)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (*params, generation, added, retired),
        )
        if generation % _LOG_KEPT == 0:
            c.execute(
                "DELETE FROM scope_log WHERE tenant_id = ? AND scope = ? AND owner = ?"
                " AND generation <= ?",
                (*params, generation - _LOG_KEPT),
            )

    def _live_count(self, c: sqlite3.Connection, ref: ScopeRef) -> int:
        row = c.execute(
            "SELECT live_count FROM scope_state WHERE tenant_id = ? AND scope = ? AND owner = ?",
            (ref.tenant_id, ref.scope.value, ref.owner),
        ).fetchone()
        return int(row[0]) if row else 0

    def _current_row(
        self, c: sqlite3.Connection, ref: ScopeRef, memory_id: str
    ) -> sqlite3.Row | None:
        rows = fetch_all(
            c,
            f"SELECT {COLUMNS}, embedding_key, vector FROM memory_versions"
            " WHERE tenant_id = ? AND id = ? AND is_current = 1 AND scope = ? AND owner = ?",
            (ref.tenant_id, memory_id, ref.scope.value, ref.owner),
        )
        return rows[0] if rows else None

    # -- reads -------------------------------------------------------------------------------
    def locate(self, tenant_id: str, memory_id: str) -> ScopeRef | None:
        row = (
            self._read()
            .execute(
                "SELECT scope, owner FROM memory_versions WHERE tenant_id = ? AND id = ?"
                " AND is_current = 1",
                (tenant_id, memory_id),
            )
            .fetchone()
        )
        return None if row is None else ScopeRef(tenant_id, Scope(row[0]), row[1])

    def _read(self) -> sqlite3.Connection:
        """The reader, or this thread's open ``transaction()`` (its own writes are visible)."""
        joined: sqlite3.Connection | None = joined_to(self)
        return self._reader() if joined is None else joined

    def get(self, ref: ScopeRef, memory_id: str) -> MemoryVersion | None:
        row = self._current_row(self._read(), ref, memory_id)
        return None if row is None else decode_row(to_record, row, row["key"])

    def history(self, ref: ScopeRef, memory_id: str) -> list[MemoryVersion]:
        rows = fetch_all(
            self._read(),
            f"SELECT {COLUMNS} FROM memory_versions"
            " WHERE tenant_id = ? AND id = ? AND scope = ? AND owner = ? ORDER BY version",
            (ref.tenant_id, memory_id, ref.scope.value, ref.owner),
        )
        return decode_rows(to_record, rows, _key)

    def count_live(self, ref: ScopeRef) -> int:
        return self._live_count(self._read(), ref)

    def list_page(self, ref: ScopeRef, filters: Filters, cursor: Cursor | None, limit: int) -> Page:
        where, params = list_where(ref, filters)
        if cursor is not None:
            where.append("(recorded_at < ? OR (recorded_at = ? AND id < ?))")
            at = int(cursor.recorded_at)
            params += [at, at, cursor.id]
        rows = fetch_all(
            self._reader(),
            f"SELECT {COLUMNS} FROM memory_versions WHERE {' AND '.join(where)}"
            " ORDER BY recorded_at DESC, id DESC LIMIT ?",
            (*params, limit + 1),
        )
        items = decode_rows(to_record, rows[:limit], _key)
        next_cursor = None
        if len(rows) > limit:  # the cursor is the last row read, decodable or not
            last = rows[limit - 1]
            next_cursor = Cursor(str(int(last["recorded_at"])), str(last["id"])).encode()
        return Page(items, next_cursor)

    def exact_candidates(
        self, ref: ScopeRef, folded: str, content_hash: str
    ) -> list[tuple[int, str]]:
        conn = self._read()
        params = (ref.tenant_id, ref.scope.value, ref.owner)
        out = [
            (int(r[0]), "alias")
            for r in conn.execute(
                "SELECT key FROM memory_aliases WHERE tenant_id = ? AND scope = ? AND owner = ?"
                " AND folded = ? ORDER BY key",
                (*params, folded),
            )
        ]
        out += [
            (int(r[0]), "text")
            for r in conn.execute(
                "SELECT key FROM memory_versions WHERE tenant_id = ? AND scope = ? AND owner = ?"
                " AND content_hash = ? AND is_current = 1 ORDER BY key",
                (*params, content_hash),
            )
        ]
        return out

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]:
        out: dict[int, MemoryVersion] = {}
        conn = self._read()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _CHUNK):
            part = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(part))
            rows = fetch_all(
                conn, f"SELECT {COLUMNS} FROM memory_versions WHERE key IN ({marks})", part
            )
            for r in rows:
                found = decode_row(to_record, r, r["key"])
                if found is not None:
                    out[int(r["key"])] = found
        return out

    def _forget_index(self, ref: ScopeRef) -> None:
        """Drop this process's index of a scope and its file (an erase changed rows under it)."""
        if joined_to(self) is not None:  # again once the transaction() ends (it commits later)
            self._local.__dict__.setdefault("forget_after", set()).add(ref)
        with self._index_lock:
            self._indexes.pop(ref, None)
            self._forget_file(ref)

    def storage_bytes(self) -> int:
        """The database file with its WAL and shared-memory files, and the scope index files
        kept beside it in ``<database>-index/`` (issue 23)."""
        if self.path == ":memory:":
            return 0
        base = Path(self.path)
        files = list(base.parent.glob(base.name + "*"))
        folder = Path(self.path + "-index")  # counted even when this process keeps no files
        if folder.is_dir():
            files += folder.iterdir()
        return sum(_file_size(p) for p in files)


def _file_size(path: Path) -> int:
    """Bytes of a regular file; 0 for a folder or a file removed meanwhile."""
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


def _key(row: sqlite3.Row) -> object:
    return row["key"]
