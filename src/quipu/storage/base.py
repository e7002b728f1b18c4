"""The Store protocol: the one seam between the service and a database backend.

It speaks only Quipu's domain types (records, query objects, numpy vectors); no cursor or
driver row crosses it. Each method is atomic. Capabilities a backend lacks are declared in
:class:`Capabilities`, never signalled with ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from quipu.core.auth import Actor, AuditEvent, Credential, Tenant
from quipu.core.governance import EraseReport, Erasure, Hold, Project, Snapshot, SubjectInfo
from quipu.core.graph import GraphDraft
from quipu.core.idempotency import IdempotencyScope, StoredAnswer
from quipu.core.jobs import Job, JobStatus, NewJob
from quipu.core.portable import PortableSession
from quipu.core.query import Candidate, Cursor, Filters, Page
from quipu.core.records import MemoryVersion, Principal, ScopeRef, Status, WriteResult
from quipu.core.sessions import (
    IdleSession,
    SessionBounds,
    SessionKey,
    SessionTurn,
    Watermark,
)
from quipu.core.versions import Change
from quipu.retrieval.vectors import Vector as Vector  # noqa: PLC0414 (re-exported)
from quipu.storage.batch import BatchOutcome, BatchRow
from quipu.storage.plane_store import EmbeddingPin as EmbeddingPin  # noqa: PLC0414 (re-exported)
from quipu.storage.plane_store import PlaneStore


@dataclass(frozen=True)
class Capabilities:
    backend: str
    vector_search: str  # e.g. "exact-numpy", "hnsw+exact"
    full_text: str  # e.g. "fts5-bm25", "tsvector"
    sources: frozenset[str]  # planes a search can read (RECALL-8)


@dataclass(frozen=True)
class SearchInfo:
    """How a candidate search ran, for ``meta`` (which path, how many rows scanned)."""

    path: str
    scanned: int
    sessions: Mapping[int, str | None] | None = None
    """The session of each returned key (``None``: it has none), when the backend read it
    with the row; ``None`` when it did not (recall then asks :meth:`Store.sessions_of`)."""


class Store(PlaneStore, Protocol):
    capabilities: Capabilities

    def close(self) -> None: ...

    # -- embedding pin and cache -------------------------------------------------------------
    def embedding_pin(self) -> EmbeddingPin | None: ...

    def pin_embedding(self, pin: EmbeddingPin) -> None:
        """Record the pin if none; raise Conflict ``embedding_model_mismatch`` if different."""

    def cached_embeddings(
        self, tenant_id: str, model_id: str, keys: Sequence[str]
    ) -> dict[str, Vector]: ...

    # -- writes ------------------------------------------------------------------------------
    # ``by`` is who makes the write: each version written goes to the audit log with ``by``'s
    # key, role, agent, user and surface, in the version's own transaction (SAFE-4).
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
        """Insert version 1 of a new family, unless a live exact duplicate exists (MEM-6).

        Raises LimitExceeded ``quota_exceeded`` when the scope owner already holds ``quota``
        live rows; the check and the insert are one serialised transaction (MEM-5). With
        ``graph``, an active version's entity-graph mirror is written in the same transaction
        (GRAPH-1: both commit or neither).
        """

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
        """Append the successor of the family's current version (NotFound, Conflict). With
        ``graph``, an active successor's graph mirror is written in the same transaction.

        ``quota`` applies only when the change makes a non-live family live again.
        """

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
        """Mark ``old_id`` superseded by ``new_id`` (both in ``ref``) and give ``new_id`` a
        version with relation ``supersedes`` naming ``old_id`` (MEM-3), in one transaction;
        returns the old's new version. With ``expected_version``, a newer current version of
        ``old_id`` is a 409 (LIFE-2)."""

    def merge(
        self,
        ref: ScopeRef,
        survivor_id: str,
        change: Change,
        expected_version: int | None,
        vector: Vector | None,
        embedding_key: str | None,
        others: Sequence[str],
        now: datetime,
        *,
        by: Actor,
    ) -> MemoryVersion:
        """In one transaction: append ``change`` (relation ``merges``) to ``survivor_id`` and
        mark each of ``others`` (all in ``ref``) superseded by it (LIFE-7). NotFound for any
        missing id, Conflict for a stale ``expected_version`` or an illegal move."""

    def import_versions(self, items: Iterable[tuple[MemoryVersion, Vector | None]]) -> int:
        """Insert exported versions verbatim (same ids, versions and times); skip ones present."""

    # -- reads -------------------------------------------------------------------------------
    def locate(self, tenant_id: str, memory_id: str) -> ScopeRef | None:
        """The scope partition a memory id lives in, for authorising by-id calls."""

    def get(self, ref: ScopeRef, memory_id: str) -> MemoryVersion | None: ...

    def history(self, ref: ScopeRef, memory_id: str) -> list[MemoryVersion]: ...

    def list_page(
        self, ref: ScopeRef, filters: Filters, cursor: Cursor | None, limit: int
    ) -> Page: ...

    def count_live(self, ref: ScopeRef) -> int: ...

    def vector_candidates(
        self, ref: ScopeRef, vector: Vector, filters: Filters, limit: int
    ) -> tuple[list[Candidate], SearchInfo]:
        """Exact-by-contract nearest neighbours inside one scope, filters applied (RECALL-5)."""

    def text_candidates(
        self, ref: ScopeRef, query: str, filters: Filters, limit: int, *, expansion: float = 0.0
    ) -> tuple[list[Candidate], SearchInfo]:
        """Full-text (BM25) candidates sharing a key with ``query``, best first. ``expansion``
        > 0 adds the neighbours of the query's words as keys at that weight x their cosine
        (:func:`~quipu.retrieval.expansion.query_keys`)."""

    def key_frequencies(self, ref: ScopeRef, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        """The document count and frequencies BM25's idf reads in the scope: how many rows its
        keyword index holds, and how many of them hold each of ``keys`` (BM25 keys; those none
        holds are left out). Recall's focused query (:mod:`quipu.retrieval.focus`) reads it."""

    def exact_candidates(
        self, ref: ScopeRef, folded: str, content_hash: str
    ) -> list[tuple[int, str]]:
        """Current rows whose folded alias (``"alias"``) or folded text (``"text"``) equals the
        query exactly (RECALL-7); filters are applied by the caller on the loaded rows."""

    def missing_vectors(self, limit: int) -> list[tuple[int, str, str]]:
        """(key, tenant_id, text) of versions stored without a vector, oldest first."""

    def attach_vectors(self, model_id: str, items: Sequence[tuple[int, str, Vector]]) -> None:
        """Store vectors for versions saved without one: (key, embedding_key, vector)."""

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]: ...

    def sessions_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, str]:
        """The session id (provenance) of each of ``keys`` in the scope that was written in
        a session; keys without one, or outside the scope, are left out."""

    def vectors_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, Vector]:
        """The stored vectors of ``keys`` in the scope (keys without one are left out)."""

    def similarities(self, ref: ScopeRef, keys: Sequence[int], vector: Vector) -> dict[int, float]:
        """Inner product (the cosine: vectors are unit length) of ``vector`` with the stored
        vector of each of ``keys`` in the scope; keys without one, or of another scope, are
        left out. Recall's feedback pass ranks its pool with it instead of searching again."""

    # -- tenants, credentials, audit (SCOPE-1, SCOPE-2, SAFE-4) ------------------------------
    # Every memory version a backend writes is also written to the audit log in the same
    # transaction, naming the write's ``by`` (except verbatim imports, which the service audits
    # as one event, and erase tombstones, which name the erasure's ``by``).
    def create_tenant(self, tenant: Tenant) -> None:
        """Conflict ``tenant_exists`` when the id is taken."""

    def get_tenant(self, tenant_id: str) -> Tenant | None: ...

    def list_tenants(self) -> list[Tenant]: ...

    def insert_credential(self, credential: Credential, secret_hash: str) -> None: ...

    def find_credential(self, key_id: str) -> tuple[Credential, str] | None: ...

    def list_credentials(self, tenant_id: str) -> list[Credential]: ...

    def revoke_credential(self, tenant_id: str, key_id: str, at: datetime) -> bool: ...

    def touch_credential(self, key_id: str, at: datetime) -> None: ...

    def record_audit(self, event: AuditEvent) -> None: ...

    def list_audit(self, tenant_id: str, before: int | None, limit: int) -> list[AuditEvent]:
        """Newest first, ``seq < before``."""

    # -- sessions, watermarks, jobs, model budget (SESSION, PROMO, JOB) ----------------------
    def append_turn(
        self,
        key: SessionKey,
        writer: Principal,
        role: str,
        content: str,
        metadata: dict[str, Any],
        created_at: datetime,
        expires_at: datetime,
        bounds: SessionBounds,
        observed_at: datetime | None = None,
    ) -> SessionTurn:
        """Append with the next sequence number of that session (total, deterministic order),
        and record ``writer`` as the session's last writer (a sweep promotion acts as it).

        Raises LimitExceeded ``quota_exceeded`` when the turn would pass ``bounds``; the check
        and the insert are one serialised transaction, and the subject's expired turns are
        pruned first when a bound is reached."""

    def session_turns(
        self, key: SessionKey, after_seq: int, limit: int, now: datetime
    ) -> list[SessionTurn]:
        """Unexpired turns after ``after_seq``, in order."""

    def prune_turns(self, now: datetime, limit: int) -> int:
        """Delete up to ``limit`` expired turns and release what they held against the bounds."""

    def idle_sessions(self, idle_before: datetime, now: datetime, limit: int) -> list[IdleSession]:
        """Sessions with no turn since ``idle_before`` that have turns newer than their
        watermark, or whose last promotion should be tried again (``RETRY_LATER``, marked
        before ``idle_before``). Fair across tenants: each tenant's sessions nearest expiry
        first (PROMO-6), the tenants taking turns, so one tenant cannot fill the page."""

    def get_watermark(self, key: SessionKey) -> Watermark | None: ...

    def set_watermark(self, key: SessionKey, mark: Watermark) -> None: ...

    def enqueue_job(self, job: NewJob, now: datetime) -> tuple[Job, bool]: ...

    def claim_job(
        self, kinds: list[str], worker: str, lease_until: datetime, now: datetime
    ) -> Job | None: ...

    def heartbeat_job(
        self,
        job_id: str,
        token: int,
        lease_until: datetime,
        checkpoint: dict[str, Any] | None,
        now: datetime,
    ) -> bool: ...

    def finish_job(
        self,
        job_id: str,
        token: int,
        status: JobStatus,
        now: datetime,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        run_after: datetime | None = None,
    ) -> bool: ...

    def cancel_job(self, job_id: str, now: datetime) -> Job | None: ...

    def retry_job(self, job_id: str, now: datetime) -> Job | None: ...

    def get_job(self, job_id: str) -> Job | None: ...

    def list_jobs(
        self, tenant_id: str | None, status: JobStatus | None, limit: int
    ) -> list[Job]: ...

    def queue_stats(self) -> dict[str, tuple[int, datetime | None]]:
        """For each active job status (``queued``, ``running``): how many jobs, and when the
        oldest of them was created (``None`` when there are none); read by ``/metrics``."""

    def reserve_budget(self, tenant_id: str, window_start: datetime, limit: int) -> bool: ...

    def release_budget(self, tenant_id: str, window_start: datetime) -> None:
        """Give back one reserved model call of that window (no compile ran for it)."""

    def take_rate_token(self, key_id: str, rate: float, burst: int, now: datetime) -> float:
        """One token of the key's write bucket, shared by every process on this store:
        0.0 when admitted, else the seconds until one is available (MEM-5)."""

    # -- idempotency keys of HTTP writes (issue 27) -------------------------------------------
    def claim_idempotency(
        self, scope: IdempotencyScope, fingerprint: str, now: datetime, expires_at: datetime
    ) -> StoredAnswer | None:
        """Claim ``scope``'s key for a request with ``fingerprint``: ``None`` when it was free
        (or its row expired: the tenant's expired rows are pruned first), else the row as
        stored (still running when its status is ``None``). One transaction."""

    def finish_idempotency(
        self, scope: IdempotencyScope, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        """Store the answer of the request that claimed ``scope``'s key."""

    def release_idempotency(self, scope: IdempotencyScope) -> None:
        """Forget an unfinished claim (the request failed or its answer is not kept)."""

    def maintain(self) -> dict[str, list[str]]:
        """Idempotent upkeep a backend needs as scopes grow (e.g. per-scope ANN indexes);
        run by a periodic job and by ``quipu migrate``. Returns what it did, by kind."""

    def storage_bytes(self) -> int:
        """Bytes the store occupies on disk (files, or the database), for size-per-memory
        figures."""

    # -- whole-store export and import (OPS-2) -------------------------------------------------
    def export_sessions(self, tenant_id: str | None) -> Iterator[PortableSession]:
        """Every session (of one tenant, or all), with its turns, writer and watermark."""

    def import_sessions(self, sessions: Iterable[PortableSession]) -> int:
        """Insert exported sessions verbatim, skipping turns and watermarks present; the
        bounds' counters grow by what was added. Returns the turns added."""

    def export_audit(self, tenant_id: str | None) -> Iterator[AuditEvent]:
        """The audit log (of one tenant, or all), oldest first."""

    def import_audit(self, events: Iterable[AuditEvent]) -> int:
        """Append exported audit events, skipping any already present (same tenant, time,
        actor, action and targets). Returns how many were added."""

    # -- governance (LIFE-4..8, SCOPE-6, SCOPE-8) ---------------------------------------------
    def erase_families(
        self, tenant_id: str, memory_ids: Sequence[str], erasure: Erasure
    ) -> EraseReport:
        """Erase every version of each family in ``memory_ids`` in one transaction (LIFE-4):
        text, quote, tags, metadata, aliases, reasons, BM25 keys and vectors of each version;
        the reasons of audit lines about the family; the content of jobs that quote it. Appends
        each family's tombstone with its audit line naming ``erasure.by``. Families already
        erased or not found are skipped (not in the report). Legal holds are the caller's:
        every erase runs inside :func:`quipu.governance.holds.under_holds`."""

    def subject_families(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        """Up to ``limit`` ids of families about end user ``user_id`` (its ``user`` scope and
        every ``agent_user`` scope with that user) that are not yet erased."""

    def erase_subject_sessions(
        self, tenant_id: str, user_id: str, erasure: Erasure, limit: int
    ) -> EraseReport:
        """Delete up to ``limit`` session turns of ``user_id``'s sessions with what the session
        tier holds about them (counters, watermarks), and scrub the promotion jobs of those
        sessions; an empty report when nothing is left. Holds: as :meth:`erase_families`."""

    def blocking_holds(self, tenant_id: str, user_id: str | None) -> list[Hold]:
        """Active holds an erasure of ``user_id`` (or, with None, of the whole tenant) would
        break: the tenant's, the subject's, and those on memories of the subject."""

    def job_text_erase(
        self, tenant_id: str, *, job_id: str | None = None, user_id: str | None = None
    ) -> int:
        """Empty the caller text a job's payload carries (a harvest batch's ``spans``): of job
        ``job_id`` once it has ended, or of every job acting for end user ``user_id`` (a
        subject erasure). The number of jobs changed."""

    def erase_holds(self, tenant_id: str) -> list[Hold]:
        """The tenant's active holds, read inside this thread's open :meth:`transaction`: an
        erase sees every hold committed before it, and a hold set meanwhile waits until the
        erase ends (LIFE-4; :func:`quipu.governance.holds.under_holds` is the one caller)."""

    def checkpoint(self) -> bool:
        """After an erase commits: let page images from before it leave the disk (SQLite:
        a truncating WAL checkpoint; PostgreSQL: nothing, ``quipu reclaim`` vacuums). False
        when a reader kept it from completing; it is deferred inside a transaction."""

    def put_hold(self, hold: Hold) -> None:
        """Store an active hold; it waits for an erase that is checking holds to end."""

    def release_hold(
        self, tenant_id: str, hold_id: str, by: str, at: datetime, reason: str
    ) -> Hold | None:
        """Release an active hold; None when there is no such active hold in the tenant."""

    def list_holds(self, tenant_id: str, include_released: bool) -> list[Hold]: ...

    def put_snapshot(self, snapshot: Snapshot) -> None: ...

    def get_snapshot(self, tenant_id: str, snapshot_id: str) -> Snapshot | None: ...

    def export_snapshots(self, tenant_id: str | None) -> Iterator[Snapshot]:
        """Every snapshot (of one tenant, or all), by tenant then id (OPS-2)."""

    def put_project(self, project: Project) -> None:
        """Conflict ``project_exists`` when the tenant already has that project id."""

    def list_projects(self, tenant_id: str) -> list[Project]: ...

    def has_project(self, tenant_id: str, project_id: str) -> bool: ...

    def list_subjects(
        self, tenant_id: str, after: tuple[str, str] | None, limit: int
    ) -> list[SubjectInfo]:
        """The tenant's scope owners ordered by (scope, owner), after ``after``."""

    def reclaim(self) -> dict[str, object]:
        """Rewrite what holds freed row images (SQLite: VACUUM and a truncated WAL; PostgreSQL:
        VACUUM FULL of the content tables and a checkpoint), so erased bytes leave the disk."""

    def list_current(
        self, tenant_id: str, statuses: frozenset[Status], cursor: Cursor | None, limit: int
    ) -> Page:
        """Current versions of the whole tenant in ``statuses``, newest first, every project
        and scope owner (the review queue and superadmin oversight)."""

    def export_versions(
        self, tenant_id: str | None
    ) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        """Every version in a stable order, with its vector when one is stored."""

    def enqueue_bounded_job(
        self, job: NewJob, now: datetime, *, group: str, cap: int
    ) -> Job | None:
        """Queue ``job`` unless ``cap`` queued or running jobs of its tenant and kind already
        have idempotency keys starting with ``group``: None then, nothing written. Count and
        insert are one serialised step (the durable harvest queue's bound, HARVEST-1)."""

    def count_active_jobs(self, kind: str, tenant_id: str | None = None) -> int:
        """Queued or running jobs of ``kind``, of one tenant or of every tenant."""

    def insert_batch(
        self, ref: ScopeRef, rows: Sequence[BatchRow], quota: int, *, by: Actor
    ) -> list[BatchOutcome]:
        """Insert each row as :meth:`insert` would — admitted, a live exact duplicate (in the
        store or earlier in the batch) not written again, the quota checked per row, its graph
        mirror with it — all in one transaction (the caller's open ``transaction()`` when there
        is one): any failure leaves none of them. A row over the quota gets its
        LimitExceeded in its place and the others go on (issue 24, promotion cost)."""

    def defer_job(
        self, job_id: str, token: int, now: datetime, run_after: datetime, result: dict[str, Any]
    ) -> bool:
        """Put a running job back in the queue, due at ``run_after``, giving back the attempt
        its claim took (a deferral is not a failure); only for the current lease holder."""
