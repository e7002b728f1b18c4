"""The PostgreSQL + pgvector backend: the same Store contract as SQLite, for several server
processes sharing one database (or a Citus cluster, docs/scale-out.md).

Connections come from a psycopg pool in autocommit mode; every write is one explicit
transaction. Writers of a scope owner serialise on that owner's ``scope_state`` row (an upsert
that takes the row lock), so the live-row quota and the exact-duplicate check hold across
processes (MEM-5, MEM-6). Search strategy: :mod:`quipu.storage.postgres.search`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from quipu.core.auth import Actor, version_audit
from quipu.core.graph import GraphDraft
from quipu.core.lifecycle import LIVE
from quipu.core.query import Candidate, Cursor, Filters, Page
from quipu.core.records import MemoryVersion, Relation, Scope, ScopeRef, Status, WriteResult
from quipu.core.text import fold
from quipu.core.versions import UNSET, Change, check_expected, next_version, valid_to
from quipu.errors import Conflict, LimitExceeded, NotFound, Unavailable, closed_store
from quipu.retrieval.bm25 import document_tokens
from quipu.retrieval.expansion import query_keys
from quipu.storage.admission import admit, admit_versions
from quipu.storage.base import Capabilities, EmbeddingPin, SearchInfo, Vector
from quipu.storage.decode import decode_row, decode_rows, loads
from quipu.storage.graph_rows import same_text
from quipu.storage.joined import joined_to
from quipu.storage.postgres import bulk, routed
from quipu.storage.postgres.batch import BatchTables
from quipu.storage.postgres.control import ControlTables
from quipu.storage.postgres.documents import DocumentTables
from quipu.storage.postgres.filters import filter_where, scope_where
from quipu.storage.postgres.governance import GovernanceTables
from quipu.storage.postgres.graph import GraphTables, mirror_in
from quipu.storage.postgres.graph_links import GraphLinkReads
from quipu.storage.postgres.graph_reads import GraphReads
from quipu.storage.postgres.idempotency import IdempotencyTables
from quipu.storage.postgres.index import IndexTables
from quipu.storage.postgres.knowledge import KnowledgeTables
from quipu.storage.postgres.knowledge_candidates import CandidateTables
from quipu.storage.postgres.knowledge_shown import ShownTables
from quipu.storage.postgres.kv import KVTables
from quipu.storage.postgres.migrate import is_distributed, migrate
from quipu.storage.postgres.placement import PlacementTables
from quipu.storage.postgres.portable import PortableTables
from quipu.storage.postgres.registry import RegistryTables
from quipu.storage.postgres.rows import (
    COLUMNS,
    INSERT_SQL,
    WRITE_SQL,
    tenant_number_of,
    to_record,
    utc,
    write_params,
)
from quipu.storage.postgres.search import (
    SearchPlan,
    ann_index_name,
    ann_index_sql,
    ann_knn,
    bm25,
    exact_knn,
    exact_scan_floor,
    key_frequencies,
    scope_vectors,
    track_terms,
    window_rows,
)
from quipu.storage.postgres.sessions_view import SessionViews
from quipu.storage.postgres.work import WorkTables
from quipu.storage.timecodec import from_micros, to_micros

_LIVE = [s.value for s in LIVE]
_CHUNK = 1000
#: Advisory lock key serialising the first embedding pin ("qpin").
_PIN_LOCK = 0x7170696E


class PostgresStore(
    BatchTables,
    ControlTables,
    WorkTables,
    GovernanceTables,
    RegistryTables,
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
    """A Store over a PostgreSQL database with pgvector >= 0.8. Thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        min_connections: int = 1,
        max_connections: int = 8,
        migrate_schema: bool = True,
        search_plan: SearchPlan | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        self.plan = search_plan or SearchPlan()
        conninfo = with_utc(url)
        #: The connection string this store uses (for tools and tests; holds any password).
        self.conninfo = conninfo
        if migrate_schema:
            with psycopg.connect(conninfo, connect_timeout=int(connect_timeout)) as conn:
                migrate(conn)
        self._closed = False
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo,
            min_size=min_connections,
            max_size=max_connections,
            kwargs={"autocommit": True},
            configure=_configure,
            timeout=connect_timeout,
            open=True,
        )
        #: Whether the tables are distributed by Citus (``quipu migrate --citus``): then a
        #: version is written by single-shard statements (:mod:`.routed`).
        with self._conn() as conn:
            self.distributed = is_distributed(conn)
        self._lock = threading.Lock()
        self._numbers: dict[str, int] = {}
        self._tenants: dict[int, str] = {}
        self._pin: EmbeddingPin | None = None
        self._ann_valid: set[str] = set()
        self.capabilities = Capabilities(
            backend="postgres",
            vector_search="exact-btree+hnsw",
            full_text="bm25-tsvector",
            sources=frozenset({"facts", "notes"}),
        )
        if migrate_schema:
            bulk.refresh_terms(self)

    def close(self) -> None:
        self._closed = True
        self._pool.close()

    # -- connections -------------------------------------------------------------------------
    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        joined = joined_to(self)  # inside transaction() (GRAPH-2): its connection, its commit
        if joined is not None:
            yield joined
            return
        if self._closed:
            raise closed_store()
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise Unavailable(
                "no database connection became free in time", code="store_busy"
            ) from None
        except psycopg.OperationalError as exc:
            raise Unavailable(
                f"the database is unreachable: {exc}", code="store_unavailable"
            ) from None

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        with self._conn() as conn, conn.transaction():
            yield conn

    # -- tenants as key prefixes -------------------------------------------------------------
    def _tenant_number(self, tenant_id: str) -> int:
        """The tenant's key prefix, registered (and committed) on first use."""
        number = self._numbers.get(tenant_id)
        if number is not None:
            return number
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO tenant_keys (tenant_id) VALUES (%s)"
                " ON CONFLICT (tenant_id) DO NOTHING RETURNING number",
                (tenant_id,),
            ).fetchone()
            if row is None:
                row = conn.execute(
                    "SELECT number FROM tenant_keys WHERE tenant_id = %s", (tenant_id,)
                ).fetchone()
        assert row is not None
        number = int(row[0])
        with self._lock:
            self._numbers[tenant_id] = number
            self._tenants[number] = tenant_id
        return number

    def _tenants_of(self, keys: Iterable[int]) -> dict[str, list[int]]:
        """Group storage keys by tenant id (decoded from each key's prefix)."""
        by_number: dict[int, list[int]] = {}
        for key in keys:
            by_number.setdefault(tenant_number_of(key), []).append(key)
        unknown = [n for n in by_number if n not in self._tenants]
        if unknown:
            with self._conn() as conn:
                rows = conn.execute(
                    "SELECT number, tenant_id FROM tenant_keys WHERE number = ANY(%s)", (unknown,)
                ).fetchall()
            with self._lock:
                for number, tenant_id in rows:
                    self._tenants[int(number)] = str(tenant_id)
                    self._numbers[str(tenant_id)] = int(number)
        return {self._tenants[n]: keys_of for n, keys_of in by_number.items() if n in self._tenants}

    # -- embedding pin and cache -------------------------------------------------------------
    def embedding_pin(self) -> EmbeddingPin | None:
        if self._pin is not None:
            return self._pin
        with self._conn() as conn:
            rows = dict(
                conn.execute(
                    "SELECT key, value FROM store_meta WHERE key LIKE 'embedding_%%'"
                ).fetchall()
            )
        if "embedding_model" not in rows:
            return None
        self._pin = EmbeddingPin(rows["embedding_model"], int(rows["embedding_dimension"]))
        return self._pin

    def pin_embedding(self, pin: EmbeddingPin) -> None:
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PIN_LOCK,))
            rows = dict(conn.execute("SELECT key, value FROM store_meta").fetchall())
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
            else:
                conn.cursor().executemany(
                    "INSERT INTO store_meta (key, value) VALUES (%s, %s)",
                    [
                        ("embedding_model", pin.model_id),
                        ("embedding_dimension", str(pin.dimension)),
                    ],
                )
        self._pin = pin

    # -- upkeep of large scopes --------------------------------------------------------------
    def maintain(self) -> dict[str, list[str]]:
        """Everything large scopes need, idempotent and safe under load: the ANN index of each
        scope above ``exact_limit`` and the term statistics of each scope above
        ``text_exact_matches`` versions. Meant for ``quipu migrate`` and a periodic job."""
        return {
            "ann_indexes": self.ensure_ann_indexes(),
            "text_statistics": self.ensure_text_statistics(),
        }

    def ensure_text_statistics(self) -> list[str]:
        """Start keeping ``scope_terms`` for every large scope that lacks it; returns them as
        ``tenant/scope/owner``."""
        with self._conn() as conn:
            big = conn.execute(
                "SELECT tenant_id, scope, owner FROM scope_state WHERE NOT terms_tracked"
                " AND version_count > %s ORDER BY tenant_id, scope, owner",
                (self.plan.text_exact_matches,),
            ).fetchall()
            for tenant_id, scope, owner in big:
                track_terms(conn, ScopeRef(str(tenant_id), Scope(scope), str(owner)))
        return [f"{t}/{s}/{o}" for t, s, o in big]

    def ensure_ann_indexes(self) -> list[str]:
        """Build the partial HNSW index of every scope above ``exact_limit`` current rows that
        lacks one (``CREATE INDEX CONCURRENTLY``: writers are not blocked). Returns the names
        built. Meant for ``quipu migrate`` and the periodic maintenance job; until a scope's index
        exists, that scope is searched exactly (correct, slower; ``meta`` says so)."""
        pin = self.embedding_pin()
        if pin is None:
            return []
        with self._conn() as conn:
            big = conn.execute(
                "SELECT tenant_id, scope, owner FROM scope_state WHERE current_count > %s"
                " ORDER BY tenant_id, scope, owner",
                (self.plan.exact_limit,),
            ).fetchall()
        built = []
        for tenant_id, scope, owner in big:
            ref = ScopeRef(str(tenant_id), Scope(scope), str(owner))
            if self._ann_ready(ref, pin):
                continue
            name = ann_index_name(ref, pin)
            with self._conn() as conn:
                if not conn.execute(
                    "SELECT pg_try_advisory_lock(hashtext(%s))", (name,)
                ).fetchone()[0]:  # type: ignore[index]
                    continue  # another process is building it
                try:
                    conn.execute(
                        "SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(%s)"
                        " AND NOT indisvalid",
                        (name,),
                    ).fetchone() and conn.execute(
                        sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name))
                    )
                    conn.execute(
                        sql.SQL("SET maintenance_work_mem = {}").format(
                            sql.Literal(f"{self.plan.build_memory_mb}MB")
                        )
                    )
                    conn.execute(ann_index_sql(ref, pin, self.plan))
                    conn.execute("RESET maintenance_work_mem")
                finally:
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))
            built.append(name)
        return built

    def _ann_ready(self, ref: ScopeRef, pin: EmbeddingPin) -> bool:
        """Whether the scope's ANN index exists and is valid (positive answers are cached)."""
        name = ann_index_name(ref, pin)
        if name in self._ann_valid:
            return True
        with self._conn() as conn:
            row = conn.execute(
                "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
            ).fetchone()
        if row is not None and row[0]:
            with self._lock:
                self._ann_valid.add(name)
            return True
        return False

    def cached_embeddings(
        self, tenant_id: str, model_id: str, keys: Sequence[str]
    ) -> dict[str, Vector]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        with self._conn() as conn:
            rows = (
                conn.cursor(binary=True)
                .execute(
                    "SELECT embedding_key, vector FROM memory_versions WHERE tenant_id = %s"
                    " AND embedding_key = ANY(%s) AND embedding_model = %s"
                    " AND vector IS NOT NULL",
                    (tenant_id, unique, model_id),
                )
                .fetchall()
            )
        return {str(k): _numpy(v) for k, v in rows}

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
        """One round trip on the common path: lock the scope row, then a single statement that
        writes the version only if no live duplicate exists and the owner is under quota (one
        more for a memory written in a session: its context keys)."""
        number = self._tenant_number(ref.tenant_id)
        live = memory.status in LIVE
        if self.distributed:
            return self._insert_routed(number, ref, memory, vector, embedding_key, quota, by, graph)
        # GRAPH-1: with a graph mirror, its read rides with the scope lock, and the INSERT, a
        # guard that it wrote and the mirror's writes go with COMMIT: two round trips, as plain
        mirroring = graph is not None and memory.status is Status.ACTIVE
        for _ in range(3):
            with self._conn() as conn:
                insert = _Insert(conn, guard=mirroring)
                try:
                    with conn.pipeline() as pipe, conn.transaction():
                        _lock_scope(conn, ref, fetch=not mirroring)
                        # under the scope lock, as on SQLite: the session's previous memory is
                        # the one the key order says (a memory with a session costs one round
                        # trip more)
                        params = self._write_params(
                            number,
                            memory,
                            vector,
                            embedding_key,
                            memory.invalid_at,
                            int(live),
                            1,
                            _context_terms(conn, ref, memory),
                            by=by,
                        )
                        params.update(live=live, live_statuses=_LIVE, quota=quota)
                        insert.params = params
                        mirror_in(conn, ref, memory, graph, memory.recorded_at, insert.queue, pipe)
                        insert.queue()
                except psycopg.errors.DivisionByZero:  # the guard: the INSERT wrote nothing
                    insert.refused = True
                if insert.created():
                    return WriteResult(memory, created=True)
                dup = _live_duplicate(conn, ref, memory)
                if dup is not None:
                    return WriteResult(dup, created=False)
                count = _live_count(conn, ref)
                if count >= quota:
                    raise _over_quota(count, quota)
            # the duplicate went away or the quota freed up meanwhile: try again
        raise Unavailable("the scope is too busy to write to; retry", code="store_busy")

    def _insert_routed(
        self,
        number: int,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        quota: int,
        by: Actor,
        graph: GraphDraft | None = None,
    ) -> WriteResult:
        """:meth:`insert` on Citus: the duplicate and quota checks run under the scope lock
        before the write instead of inside it (:mod:`.routed`), with the same outcomes."""
        live = memory.status in LIVE
        with self._tx() as conn:
            count, tracked = _lock_scope(conn, ref)
            if live:
                dup = _live_duplicate(conn, ref, memory)
                if dup is not None:
                    return WriteResult(dup, created=False)
                if count >= quota:
                    raise _over_quota(count, quota)
            params = self._write_params(
                number,
                memory,
                vector,
                embedding_key,
                memory.invalid_at,
                int(live),
                1,
                _context_terms(conn, ref, memory),
                by=by,
            )
            routed.write(conn, params, terms_tracked=tracked)
            mirror_in(conn, ref, memory, graph, memory.recorded_at)
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
        number = self._tenant_number(ref.tenant_id)
        with self._tx() as conn:
            return self._append(
                conn, number, ref, memory_id, change, expected_version, vector, embedding_key,
                now, quota, by, graph,
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
        number = self._tenant_number(ref.tenant_id)
        with self._tx() as conn:
            _lock_scope(conn, ref)
            if _current_row(conn, ref, new_id) is None:
                raise NotFound(f"no memory {new_id}", details={"id": new_id})
            old = replace(
                change,
                status=Status.SUPERSEDED,
                invalid_at=now if change.invalid_at in (UNSET, None) else change.invalid_at,
                related_id=new_id,
                relation=Relation.SUPERSEDED_BY,
            )
            done = self._append(
                conn, number, ref, old_id, old, expected_version, None, None, now, 2**62, by
            )
            stamp = Change(
                actor=change.actor,
                relation=Relation.SUPERSEDES,
                reason=change.reason,
                related_id=old_id,
            )  # the replacing memory names what it replaced (MEM-3)
            self._append(conn, number, ref, new_id, stamp, None, None, None, now, 2**62, by)
            return done

    def _append(
        self,
        conn: psycopg.Connection[Any],
        number: int,
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
        live_count, tracked = _lock_scope(conn, ref)
        row = _current_row(conn, ref, memory_id)
        if row is None:
            raise NotFound(f"no memory {memory_id}", details={"id": memory_id})
        current = to_record(row)
        old_key, old_embedding_key, old_vector = int(row[0]), row[28], row[29]
        check_expected(current, expected_version)
        new = next_version(current, change, now)
        was_live, is_live = current.status in LIVE, new.status in LIVE
        if is_live and not was_live and live_count >= quota:
            raise _over_quota(live_count, quota)
        conn.execute(
            "UPDATE memory_versions SET is_current = false, valid_to = %s"
            " WHERE tenant_id = %s AND key = %s",
            (valid_to(current, new), ref.tenant_id, old_key),
        )
        if current.aliases:
            conn.execute(
                "DELETE FROM memory_aliases WHERE tenant_id = %s AND scope = %s AND owner = %s"
                " AND folded = ANY(%s) AND key = %s",
                (
                    ref.tenant_id,
                    ref.scope.value,
                    ref.owner,
                    [fold(a) for a in current.aliases],
                    old_key,
                ),
            )
        if new.text == current.text:
            embedding_key = old_embedding_key
            vector = None if old_vector is None else _numpy(old_vector)
            new = replace(new, embedding_model=current.embedding_model)
        params = self._write_params(
            number,
            new,
            vector,
            embedding_key,
            new.invalid_at,
            int(is_live) - int(was_live),
            0,
            _context_terms(conn, ref, new),
            by=by,
        )
        if self.distributed:
            routed.write(conn, params, terms_tracked=tracked)
        else:
            conn.execute(WRITE_SQL, params)
        mirror_in(conn, ref, new, same_text(graph, current, new), now)  # GRAPH-1
        return new

    def _write_params(
        self,
        number: int,
        memory: MemoryVersion,
        vector: Vector | None,
        embedding_key: str | None,
        end: datetime | None,
        live_delta: int,
        current_delta: int,
        context: Sequence[str] = (),
        *,
        by: Actor,
    ) -> dict[str, Any]:
        """The parameters of ``WRITE_SQL`` for ``memory``, its audit line naming ``by``."""
        if vector is None or embedding_key is None or not memory.embedding_model:
            vector, embedding_key = None, None
        e = version_audit(memory, by)
        audit = {
            "a_at": e.at,
            "a_actor": e.actor_key,
            "a_role": e.role,
            "a_agent": e.agent_id,
            "a_user": e.user_id,
            "a_surface": e.surface,
            "a_action": e.action,
            "a_targets": list(e.target_ids),
            "a_reason": e.reason,
            "a_details": json.dumps(e.details, sort_keys=True),
        }
        return write_params(
            number,
            memory,
            embedding_key,
            _as_f32(vector),
            end,
            audit,
            live_delta=live_delta,
            current_delta=current_delta,
            context=context,
        )

    def import_versions(self, items: Iterable[tuple[MemoryVersion, Vector | None]]) -> int:
        items = admit_versions(items)
        return bulk.import_versions(self, items)

    def missing_vectors(self, limit: int) -> list[tuple[int, str, str]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT key, tenant_id, text FROM memory_versions"
                " WHERE embedding_key IS NULL AND is_current ORDER BY key LIMIT %s",
                (limit,),
            ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def attach_vectors(self, model_id: str, items: Sequence[tuple[int, str, Vector]]) -> None:
        tenants = self._tenants_of(key for key, _, _ in items)
        tenant_of = {key: t for t, keys in tenants.items() for key in keys}
        rows = [
            (emb_key, model_id, _as_f32(vector), tenant_of[key], key)
            for key, emb_key, vector in items
            if key in tenant_of
        ]
        if not rows:
            return
        with self._tx() as conn:
            conn.cursor().executemany(
                "UPDATE memory_versions SET embedding_key = %s, embedding_model = %s, vector = %b"
                " WHERE tenant_id = %s AND key = %s",
                rows,
            )

    # -- reads -------------------------------------------------------------------------------
    def locate(self, tenant_id: str, memory_id: str) -> ScopeRef | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT scope, owner FROM memory_versions WHERE tenant_id = %s AND id = %s"
                " AND is_current",
                (tenant_id, memory_id),
            ).fetchone()
        return None if row is None else ScopeRef(tenant_id, Scope(row[0]), str(row[1]))

    def get(self, ref: ScopeRef, memory_id: str) -> MemoryVersion | None:
        with self._conn() as conn:
            row = _current_row(conn, ref, memory_id)
        return None if row is None else decode_row(to_record, row, row[0])

    def history(self, ref: ScopeRef, memory_id: str) -> list[MemoryVersion]:
        with self._conn() as conn:
            rows = (
                conn.cursor(binary=True)
                .execute(
                    f"SELECT {COLUMNS} FROM memory_versions WHERE tenant_id = %s AND id = %s"
                    " AND scope = %s AND owner = %s ORDER BY version",
                    (ref.tenant_id, memory_id, ref.scope.value, ref.owner),
                )
                .fetchall()
            )
        return decode_rows(to_record, rows, _key)

    def count_live(self, ref: ScopeRef) -> int:
        with self._conn() as conn:
            return _live_count(conn, ref)

    def list_page(self, ref: ScopeRef, filters: Filters, cursor: Cursor | None, limit: int) -> Page:
        params: dict[str, Any] = {"limit": limit + 1}
        where = f"{scope_where(ref, params)} AND {filter_where(filters, params)}"
        if cursor is not None:
            try:
                params["c_at"] = from_micros(int(cursor.recorded_at))
            except (ValueError, OverflowError):
                return Page([], None)
            params["c_id"] = cursor.id
            where += (
                " AND (m.recorded_at < %(c_at)s OR (m.recorded_at = %(c_at)s AND m.id < %(c_id)s))"
            )
        with self._conn() as conn:
            rows = (
                conn.cursor(binary=True)
                .execute(
                    f"SELECT {_m(COLUMNS)} FROM memory_versions m WHERE {where}"
                    " ORDER BY m.recorded_at DESC, m.id DESC LIMIT %(limit)s",
                    params,
                )
                .fetchall()
            )
        items = decode_rows(to_record, rows[:limit], _key)
        next_cursor = None
        if len(rows) > limit:  # the cursor is the last row read, decodable or not
            last = rows[limit - 1]
            next_cursor = Cursor(str(to_micros(utc(last[21]))), str(last[4])).encode()
        return Page(items, next_cursor)

    def _scope_size(self, conn: psycopg.Connection[Any], ref: ScopeRef) -> int:
        row = conn.execute(
            "SELECT current_count FROM scope_state WHERE tenant_id = %s AND scope = %s"
            " AND owner = %s",
            (ref.tenant_id, ref.scope.value, ref.owner),
        ).fetchone()
        return 0 if row is None else int(row[0])

    def vector_candidates(
        self, ref: ScopeRef, vector: Vector, filters: Filters, limit: int
    ) -> tuple[list[Candidate], SearchInfo]:
        pin = self.embedding_pin()
        if pin is None or limit <= 0:
            return [], SearchInfo("exact-btree", 0)
        query = np.ascontiguousarray(vector, dtype=np.float32)
        with self._conn() as conn:
            size = self._scope_size(conn, ref)
            if size == 0:
                return [], SearchInfo("exact-btree", 0)
            if filters.as_of is not None or size <= self.plan.exact_limit:
                found, sessions = exact_knn(conn, ref, query, filters, limit, pin)
                return found, SearchInfo("exact-btree", size, sessions)
            inside = window_rows(conn, ref, filters, self.plan.exact_limit + 1)
            if inside == 0:
                return [], SearchInfo("window-empty", 0)
            if inside is not None and inside <= self.plan.exact_limit:
                found, sessions = exact_knn(conn, ref, query, filters, limit, pin, custom_plan=True)
                return found, SearchInfo("exact-window", inside, sessions)
            if not self._ann_ready(ref, pin):
                found, sessions = exact_knn(conn, ref, query, filters, limit, pin)
                return found, SearchInfo("exact-btree:ann-index-pending", size, sessions)
            found, sessions = ann_knn(
                conn, ref, query, filters, limit, pin, self.plan, distributed=self.distributed
            )
            if len(found) >= limit:
                return found, SearchInfo("hnsw-scope+rerank", len(found), sessions)
            found, sessions = exact_knn(conn, ref, query, filters, limit, pin)
            return found, SearchInfo("hnsw-scope-short:exact-btree", size, sessions)

    def scope_vectors(self, ref: ScopeRef) -> list[Vector]:
        """Every current vector of the scope (``quipu bench scale``'s numpy floor)."""
        with self._conn() as conn:
            return scope_vectors(conn, ref)

    def exact_scan_floor(self, ref: ScopeRef, vector: Vector, limit: int) -> list[int]:
        """The database's exact scan of the scope alone (``quipu bench scale``'s floor)."""
        with self._conn() as conn:
            return exact_scan_floor(conn, ref, vector, limit)

    def text_candidates(
        self, ref: ScopeRef, query: str, filters: Filters, limit: int, *, expansion: float = 0.0
    ) -> tuple[list[Candidate], SearchInfo]:
        keys = query_keys(query, expansion)
        with self._conn() as conn:
            (found, sessions), path, matched = bm25(conn, ref, keys, filters, limit, self.plan)
        return found, SearchInfo(path, matched, sessions)

    def key_frequencies(self, ref: ScopeRef, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        with self._conn() as conn:
            return key_frequencies(conn, ref, list(dict.fromkeys(keys)))

    def exact_candidates(
        self, ref: ScopeRef, folded: str, content_hash: str
    ) -> list[tuple[int, str]]:
        params = (ref.tenant_id, ref.scope.value, ref.owner)
        with self._conn() as conn:
            rows = conn.execute(  # one round trip: aliases first, then same-text rows
                "SELECT key, label FROM ("
                " SELECT key, 'alias' AS label, 0 AS part FROM memory_aliases"
                " WHERE tenant_id = %s AND scope = %s AND owner = %s AND folded = %s"
                " UNION ALL SELECT key, 'text', 1 FROM memory_versions"
                " WHERE tenant_id = %s AND scope = %s AND owner = %s AND content_hash = %s"
                " AND is_current) x ORDER BY part, key",
                (*params, folded, *params, content_hash),
            ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]:
        out: dict[int, MemoryVersion] = {}
        by_tenant = self._tenants_of(dict.fromkeys(keys))
        if not by_tenant:
            return out
        with self._conn() as conn:
            cur = conn.cursor(binary=True)
            for tenant_id, tenant_keys in by_tenant.items():
                for start in range(0, len(tenant_keys), _CHUNK):
                    for r in cur.execute(
                        f"SELECT {COLUMNS} FROM memory_versions"
                        " WHERE tenant_id = %s AND key = ANY(%s)",
                        (tenant_id, tenant_keys[start : start + _CHUNK]),
                    ).fetchall():
                        found = decode_row(to_record, r, r[0])
                        if found is not None:
                            out[int(r[0])] = found
        return out

    def _own_rows(
        self,
        ref: ScopeRef,
        keys: Sequence[int],
        select: str,
        *,
        select_params: Sequence[Any] = (),
        where: str = "",
        where_params: Sequence[Any] = (),
        binary: bool = False,
    ) -> list[tuple[Any, ...]]:
        """``(key, *select)`` of those of ``keys`` that are rows of the scope.

        By primary key, the scope checked on each row: a plan through the scope's index would
        scan the whole scope (seen at 100k rows before statistics existed). ``select`` and
        ``where`` are fixed SQL of the caller, with their own parameters."""
        if not keys:
            return []
        with self._conn() as conn:
            rows = (
                conn.cursor(binary=binary)
                .execute(
                    f"SELECT key, scope, owner, {select} FROM memory_versions"
                    f" WHERE tenant_id = %s AND key = ANY(%s){where}",
                    (*select_params, ref.tenant_id, list(dict.fromkeys(keys)), *where_params),
                )
                .fetchall()
            )
        return [
            (int(key), *rest)
            for key, scope, owner, *rest in rows
            if scope == ref.scope.value and owner == ref.owner
        ]

    def sessions_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, str]:
        rows = self._own_rows(ref, keys, "provenance->>'session_id'")
        return {key: str(session) for key, session in rows if session is not None}

    def vectors_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, Vector]:
        rows = self._own_rows(ref, keys, "vector", where=" AND vector IS NOT NULL", binary=True)
        return {key: np.array(vec.to_numpy(), dtype=np.float32) for key, vec in rows}

    def similarities(self, ref: ScopeRef, keys: Sequence[int], vector: Vector) -> dict[int, float]:
        pin = self.embedding_pin()
        if pin is None:
            return {}
        query = np.ascontiguousarray(vector, dtype=np.float32)
        # Only the scores cross the wire, not the vectors.
        rows = self._own_rows(
            ref,
            keys,
            "vector <#> %b",
            select_params=(query,),
            where=" AND vector IS NOT NULL AND embedding_model = %s",
            where_params=(pin.model_id,),
        )
        return {key: -float(distance) for key, distance in rows}

    def storage_bytes(self) -> int:
        """The store's own tables in its schema, indexes and TOAST included; under Citus also
        every shard of its distributed tables on the workers (where the memories are: the
        coordinator holds only shells and the reference tables). Not ``pg_database_size``: another
        schema's dropped tables leave their files until a checkpoint, so it can shrink while
        this store grows."""
        own = (
            "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm', 'p')"
        )
        query = f"SELECT ({own})"
        if self.distributed:
            query += (
                " + COALESCE((SELECT sum(citus_total_relation_size(p.logicalrelid))"
                " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE p.partmethod = 'h' AND n.nspname = current_schema()), 0)"
            )
        with self._conn() as conn:
            row = conn.execute(query).fetchone()
        return 0 if row is None else int(row[0])

    def export_versions(
        self, tenant_id: str | None
    ) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        return bulk.export_versions(self, tenant_id)


def _context_terms(
    conn: psycopg.Connection[Any], ref: ScopeRef, memory: MemoryVersion
) -> list[str]:
    """The own BM25 keys of the memory written last in the same session and scope, from
    another family (``SessionContext`` gives refreshes and imports the same rule)."""
    session = memory.provenance.session_id
    if session is None:
        return []
    row = conn.execute(
        "SELECT text, aliases, observed_at FROM memory_versions WHERE tenant_id = %s"
        " AND scope = %s AND owner = %s AND provenance->>'session_id' = %s AND id <> %s"
        " ORDER BY key DESC LIMIT 1",
        (ref.tenant_id, ref.scope.value, ref.owner, session, memory.id),
    ).fetchone()
    return [] if row is None else document_tokens(row[0], row[1], row[2])


def with_utc(url: str) -> str:
    """The connection string with the session time zone set to UTC (options kept)."""
    options = conninfo_to_dict(url).get("options") or ""
    return make_conninfo(url, options=f"{options} -c timezone=UTC".strip())


def _m(columns: str) -> str:
    return ", ".join(f"m.{c.strip()}" for c in columns.split(","))


def _numpy(value: Any) -> Vector:
    out: Vector = np.array(value.to_numpy(), dtype=np.float32)
    return out


def _as_f32(vector: Vector | None) -> Vector | None:
    return None if vector is None else np.ascontiguousarray(vector, dtype=np.float32)


def _over_quota(count: int, quota: int) -> LimitExceeded:
    return LimitExceeded(
        f"this scope owner already holds {count} live memories (quota {quota})",
        code="quota_exceeded",
        details={"quota": quota, "live": count},
    )


def _lock_scope(
    conn: psycopg.Connection[Any], ref: ScopeRef, *, fetch: bool = True
) -> tuple[int, bool]:
    """Take the scope owner's row lock (creating the row if needed); returns its live count and
    whether its term statistics are kept (without ``fetch``: only queues the lock in the
    pipeline and returns (0, False))."""
    cur = conn.execute(
        "INSERT INTO scope_state AS st (tenant_id, scope, owner) VALUES (%s, %s, %s)"
        " ON CONFLICT (tenant_id, scope, owner) DO UPDATE SET live_count = st.live_count"
        " RETURNING live_count, terms_tracked",
        (ref.tenant_id, ref.scope.value, ref.owner),
    )
    if not fetch:
        return 0, False
    row = cur.fetchone()
    assert row is not None
    return int(row[0]), bool(row[1])


def _live_count(conn: psycopg.Connection[Any], ref: ScopeRef) -> int:
    row = conn.execute(
        "SELECT live_count FROM scope_state WHERE tenant_id = %s AND scope = %s AND owner = %s",
        (ref.tenant_id, ref.scope.value, ref.owner),
    ).fetchone()
    return 0 if row is None else int(row[0])


def _live_duplicate(
    conn: psycopg.Connection[Any], ref: ScopeRef, memory: MemoryVersion
) -> MemoryVersion | None:
    row = (
        conn.cursor(binary=True)
        .execute(
            f"SELECT {COLUMNS} FROM memory_versions WHERE tenant_id = %s AND scope = %s"
            " AND owner = %s AND content_hash = %s AND is_current"
            " AND project IS NOT DISTINCT FROM %s AND status = ANY(%s) ORDER BY key LIMIT 1",
            (ref.tenant_id, ref.scope.value, ref.owner, memory.content_hash, memory.project, _LIVE),
        )
        .fetchone()
    )
    return None if row is None else to_record(row)


def _current_row(conn: psycopg.Connection[Any], ref: ScopeRef, memory_id: str) -> Any:
    """The family's current row: :data:`COLUMNS`, then embedding_key and vector."""
    return (
        conn.cursor(binary=True)
        .execute(
            f"SELECT {COLUMNS}, embedding_key, vector FROM memory_versions"
            " WHERE tenant_id = %s AND id = %s AND is_current AND scope = %s AND owner = %s",
            (ref.tenant_id, memory_id, ref.scope.value, ref.owner),
        )
        .fetchone()
    )


__all__ = ["PostgresStore", "SearchPlan"]


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Each pooled connection: pgvector's types, and JSON read by :func:`decode.loads` (a lone
    surrogate escape another tool stored reads as U+FFFD instead of failing a response)."""
    register_vector(conn)
    set_json_loads(loads, conn)


def _key(row: Sequence[Any]) -> object:
    return row[0]


class _Insert:
    """The conditional INSERT of :meth:`PostgresStore.insert`, queued once (by the graph
    mirror after its read, or after it); with ``guard``, followed by a statement that divides by
    zero when the INSERT wrote no row (a live duplicate or the quota), so the mirror's writes
    queued after it roll back with it."""

    def __init__(self, conn: psycopg.Connection[Any], *, guard: bool) -> None:
        self.conn = conn
        self.guard = guard
        self.params: dict[str, Any] = {}
        self.cur: psycopg.Cursor[Any] | None = None
        self.refused = False

    def queue(self) -> bool:
        if self.cur is None:
            self.cur = self.conn.execute(INSERT_SQL, self.params)
            if self.guard:
                self.conn.execute(
                    "SELECT 1 / (SELECT count(*)::int FROM memory_versions"
                    " WHERE tenant_id = %s AND id = %s)",
                    (self.params["c_tenant_id"], self.params["c_id"]),
                )
        return True

    def created(self) -> bool:
        return not self.refused and self.cur is not None and self.cur.fetchone() is not None
