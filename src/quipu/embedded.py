"""The embedded library client: ``quipu.open(path)`` (API-1).

One process, one SQLite file, the trusted local principal. Every method is the service's use
case with identity filled in; the HTTP client of the multi-tenant server mirrors these names.
"""

from __future__ import annotations

import atexit
import builtins
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from quipu.composition import build_runtime, build_service, load_settings, local_principal
from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.governance import Hold, Project, Snapshot, SubjectInfo
from quipu.core.jobs import Job
from quipu.core.query import Page, RecallResult
from quipu.core.records import MemoryVersion, Principal, WriteResult
from quipu.core.sessions import SessionTurn
from quipu.documents import DocumentService
from quipu.documents_library import LibraryDocuments
from quipu.embedded_planes import IndexGraphVerbs, KnowledgeVerbs
from quipu.embeddings.base import Embedder
from quipu.errors import ConfigurationError, QuipuError
from quipu.extraction.base import Extractor
from quipu.fanout import recall_across
from quipu.governance import Erased, GovernanceService, Resolved
from quipu.graph.service import Graph, GraphService
from quipu.jobs.visibility import visible_job, visible_jobs
from quipu.kv import KeyValues, KeyValueService
from quipu.memory_batch import remember_many
from quipu.runtime import Runtime
from quipu.search import SearchService
from quipu.settings import Settings
from quipu.storage.base import Vector
from quipu.wire import Instant, job_is_done

#: How long ``Session.promote(wait=True)`` waits for a job another thread is running.
WAIT_SECONDS = 120.0


class Session:
    """One conversation's short-term memory (SESSION-1..3) and its promotion (PROMO-1)."""

    def __init__(self, owner: Quipu, session_id: str) -> None:
        self._owner = owner
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"Session({self.session_id!r})"

    def append(
        self,
        role: str,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        expires_at: Instant | None = None,
        observed_at: Instant | None = None,
    ) -> SessionTurn:
        return self._owner.runtime.sessions.append(
            self._owner.principal,
            self.session_id,
            role,
            content,
            metadata=metadata,
            expires_at=expires_at,
            observed_at=observed_at,
        )

    def history(self, *, after: int = 0, limit: int | None = None) -> list[SessionTurn]:
        return self._owner.runtime.sessions.history(
            self._owner.principal, self.session_id, after=after, limit=limit
        )

    def promote(self, *, wait: bool = False) -> Job:
        """Queue promotion into long-term memory; with ``wait`` run due jobs here, then wait
        for the job to finish (the embedded worker thread may have claimed it first)."""
        job, _ = self._owner.runtime.sessions.promote(self._owner.principal, self.session_id)
        if not wait:
            return job
        self._owner.runtime.worker.drain()
        store = self._owner.runtime.queue.store
        deadline, pause = time.monotonic() + WAIT_SECONDS, 0.01
        while True:
            found = store.get_job(job.job_id)
            job = job if found is None else found
            if job_is_done(job) or time.monotonic() >= deadline:
                return job
            time.sleep(pause)
            pause = min(0.5, pause * 2)


class Quipu(KnowledgeVerbs, IndexGraphVerbs):
    """A memory store opened in this process. Thread-safe; close it (or use ``with``).

    Its methods are those of :class:`quipu.remote.MemoryClient`, with the same signatures as
    :class:`quipu.Client`; ``import_`` and ``embed_pending`` are local maintenance."""

    def __init__(self, runtime: Runtime, principal: Principal) -> None:
        self.runtime = runtime
        self.service = runtime.service
        self.principal = principal
        #: The key/value plane (KV-1): ``kv.set(key, value)``, ``kv.get(key).value``, ...
        self.kv = KeyValues(KeyValueService(runtime.service), principal)
        #: The documents plane (DOC-1): ``documents.add(text, title=...)``, ``.search(q)``, ...
        self.documents = LibraryDocuments(
            DocumentService(runtime.service), principal, runtime.worker
        )
        self._search = SearchService(runtime.service, self.documents.service, self.kv.service)
        #: The entity graph (GRAPH-1): ``graph.recall(q)``, ``graph.facts("Anna")``, ...
        own = runtime.service.graph
        self.graph = Graph(
            own if isinstance(own, GraphService) else GraphService(self.service), principal
        )

    # -- writes ------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        scope: str = "agent",
        kind: str = "fact",
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: Sequence[str] | None = None,
        project: str | None = None,
        confidence: float = 1.0,
        source: str = "explicit",
        observed_at: Instant | None = None,
        valid_at: Instant | None = None,
        invalid_at: Instant | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        quote: str | None = None,
        status: str | None = None,
    ) -> MemoryVersion:
        """Store ``text``; returns the memory (the existing one for an exact duplicate)."""
        return self.service.remember(self.principal, **_options(locals())).memory

    def remember_result(
        self,
        text: str,
        *,
        scope: str = "agent",
        kind: str = "fact",
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        aliases: Sequence[str] | None = None,
        project: str | None = None,
        confidence: float = 1.0,
        source: str = "explicit",
        observed_at: Instant | None = None,
        valid_at: Instant | None = None,
        invalid_at: Instant | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        quote: str | None = None,
        status: str | None = None,
    ) -> WriteResult:
        """Like :meth:`remember`, also saying whether a new memory was created."""
        return self.service.remember(self.principal, **_options(locals()))

    def revise(
        self,
        memory_id: str,
        text: str,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
        valid_at: Instant | None = None,
    ) -> MemoryVersion:
        return self.service.revise(self.principal, **_options(locals()))

    def supersede(
        self,
        old_id: str,
        new_id: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        return self.service.supersede(self.principal, **_options(locals()))

    def forget(
        self, memory_id: str, *, reason: str | None = None, expected_version: int | None = None
    ) -> MemoryVersion:
        return self.service.forget(self.principal, **_options(locals()))

    def set_status(
        self,
        memory_id: str,
        status: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        return self.service.set_status(self.principal, **_options(locals()))

    # -- reads -------------------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryVersion:
        return self.service.get(self.principal, memory_id)

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]:
        return self.service.history(self.principal, memory_id)

    def recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> RecallResult:
        return self.service.recall(self.principal, **_options(locals()))

    # -- sessions, jobs, export --------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Every plane of one scope at once, each row labelled with its plane (RECALL-8):
        "where did I record this?"."""
        return self._search.search(self.principal, query, scope=scope, k=k, planes=planes)

    def session(self, session_id: str) -> Session:
        return Session(self, session_id)

    def get_job(self, job_id: str) -> Job:
        return visible_job(self.runtime.queue.store, self.principal, job_id)

    def list_jobs(self, *, status: str | None = None, limit: int = 100) -> builtins.list[Job]:
        return visible_jobs(self.runtime.queue.store, self.principal, status=status, limit=limit)

    def export(self) -> Iterator[tuple[MemoryVersion, Vector | None]]:
        return self.service.export(self.principal)

    def import_(self, items: Iterable[tuple[MemoryVersion, Vector | None]]) -> int:
        return self.service.import_(self.principal, items)

    def embed_pending(self) -> int:
        return self.service.embed_pending()

    # -- governance (LIFE-4..8, SCOPE-6): GovernanceService with identity filled in ----------
    @property
    def governance(self) -> GovernanceService:
        return self.runtime.governance

    def erase(self, memory_id: str, *, reason: str) -> Erased:
        """Remove the content of every version of a memory, leaving a tombstone (LIFE-4)."""
        return self.governance.erase(self.principal, memory_id, reason=reason)

    def erase_subject(self, user_id: str, *, reason: str, wait: bool = False) -> Job:
        """Queue the erasure of everything about one end user; ``wait`` runs it here."""
        job, _ = self.governance.erase_subject(self.principal, user_id, reason=reason)
        if wait:
            self.runtime.worker.drain()
            job = self.governance.erasure_job(self.principal, job.job_id)
        return job

    def hold(self, kind: str, target: str | None = None, *, reason: str) -> Hold:
        return self.governance.hold(self.principal, kind, target, reason=reason)

    def release_hold(self, hold_id: str, *, reason: str) -> Hold:
        return self.governance.release_hold(self.principal, hold_id, reason=reason)

    def holds(self, *, include_released: bool = False) -> builtins.list[Hold]:
        return self.governance.holds(self.principal, include_released=include_released)

    def review_queue(
        self, *, status: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> Page:
        """The candidates and quarantined memories awaiting review, newest first."""
        return self.governance.review_queue(
            self.principal, status=status, cursor=cursor, limit=limit
        )

    def review(
        self,
        memory_id: str,
        decision: str,
        *,
        reason: str,
        reviewer: str,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Activate or reject a memory under review. Embedded mode has one principal, which
        wrote what its model proposed; ``reviewer`` names the person reviewing, recorded as
        the actor, since a writer never reviews its own candidate (LIFE-5)."""
        return self.governance.review(
            self.as_reviewer(reviewer),
            memory_id,
            decision,
            reason=reason,
            expected_version=expected_version,
        )

    def affirm(
        self, memory_id: str, *, reason: str, reviewer: str, expected_version: int | None = None
    ) -> MemoryVersion:
        return self.governance.affirm(
            self.as_reviewer(reviewer), memory_id, reason=reason, expected_version=expected_version
        )

    def refute(
        self, memory_id: str, *, reason: str, reviewer: str, expected_version: int | None = None
    ) -> MemoryVersion:
        return self.governance.refute(
            self.as_reviewer(reviewer), memory_id, reason=reason, expected_version=expected_version
        )

    def restore(
        self,
        memory_id: str,
        version: int,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Write ``version``'s content as the memory's new version (relation ``restores``)."""
        return self.governance.restore(
            self.principal, memory_id, version, reason=reason, expected_version=expected_version
        )

    def merge(
        self,
        memory_ids: Sequence[str],
        text: str,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> MemoryVersion:
        """Merge duplicates of one scope into the first id (relation ``merges``)."""
        return self.governance.merge(
            self.principal,
            list(memory_ids),
            text,
            reason=reason,
            expected_version=expected_version,
        )

    def snapshot(
        self,
        *,
        ids: Sequence[str] | None = None,
        members: Sequence[Mapping[str, Any]] | None = None,
        label: str | None = None,
        recall_id: str | None = None,
    ) -> Snapshot:
        """Pin versions for a run: ``ids`` (current versions), ``members`` ({id, version}) or
        ``recall_id`` (what a merged recall showed this caller, as it was then)."""
        return self.governance.snapshot_create(
            self.principal,
            ids=None if ids is None else list(ids),
            members=None if members is None else [dict(m) for m in members],
            label=label,
            recall_id=recall_id,
        )

    def resolve_snapshot(self, snapshot_id: str) -> Resolved:
        return self.governance.snapshot_resolve(self.principal, snapshot_id)

    def create_project(self, project_id: str, *, name: str | None = None) -> Project:
        return self.governance.project_create(self.principal, project_id, name=name)

    def projects(self) -> builtins.list[Project]:
        return self.governance.projects(self.principal)

    def audit(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[builtins.list[AuditEvent], str | None]:
        return self.governance.audit(self.principal, cursor=cursor, limit=limit)

    def as_reviewer(self, reviewer: str) -> Principal:
        """The local principal acting as the named human reviewer (key ``reviewer:NAME``)."""
        name = validate.identifier(reviewer, field="reviewer")
        return replace(self.principal, key_id=f"reviewer:{name}")

    def close(self) -> None:
        self.documents.service.close()
        merged = self.__dict__.pop("_merged", None)
        if merged is not None:
            merged.close()
        self.runtime.close()

    def __enter__(self) -> Quipu:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- oversight and job control (SCOPE-8, SAFE-4): the HTTP clients' verbs, same codes ------
    def erasure_job(self, job_id: str) -> Job:
        """A subject erasure's job, with its progress and final counts per table. Ids are
        checked first, as the HTTP clients check them before a request (422 ``invalid_id``)."""
        ident = validate.identifier(job_id, field="job_id")
        return self.governance.erasure_job(self.principal, ident)

    def subjects(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> tuple[builtins.list[SubjectInfo], str | None]:
        """Every scope owner of the tenant with its live memories (superadmins; audited)."""
        return self.governance.subjects(self.principal, cursor=cursor, limit=limit)

    def oversight_list(
        self,
        *,
        scope: str | None = None,
        owner: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        statuses: Sequence[str] | None = None,
        as_of: Instant | None = None,
    ) -> Page:
        """Any subject's memories, or with no ``owner`` every owner's (superadmins)."""
        return self.governance.oversight_list(self.principal, **_options(locals()))

    def oversight_forget(self, memory_id: str, *, reason: str | None = None) -> MemoryVersion:
        """Forget any memory of the tenant (superadmins; audited)."""
        ident = validate.identifier(memory_id, field="id")
        return self.governance.oversight_forget(self.principal, ident, reason=reason)

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job of the tenant (admins; audited ``job.cancel``)."""
        return self.governance.job_cancel(
            self.principal, validate.identifier(job_id, field="job_id")
        )

    def retry_job(self, job_id: str) -> Job:
        """Queue a failed or cancelled job again (admins; audited ``job.retry``)."""
        return self.governance.job_retry(
            self.principal, validate.identifier(job_id, field="job_id")
        )

    # ``list`` last: below it, the name would shadow the builtin in annotations.
    def list(
        self,
        *,
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> Page:
        return self.service.list(self.principal, **_options(locals()))

    # -- recall across scopes (SCOPE-4), the rest of the knowledge plane (KNOW-1) ------------
    def recall_across(
        self,
        query: str,
        scopes: Sequence[str],
        *,
        k: int | None = None,
        planes: Sequence[str] | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> RecallResult:
        """One recall per scope of ``scopes`` (each its own read), merged best first and cut
        to ``k``; every hit keeps its memory's scope, ``meta.scopes`` each scope's meta."""
        options = _options(locals())
        del options["query"], options["scopes"], options["k"]
        return recall_across(self.service, self.principal, query, list(scopes), k=k, **options)

    def remember_many(
        self, items: Sequence[str | Mapping[str, Any]], *, scope: str = "agent"
    ) -> builtins.list[WriteResult | QuipuError]:
        """Store each of ``items`` (a text, or a mapping of :meth:`remember`'s fields) in
        ``scope`` in one transaction, the texts embedded together (issue 23). One result per
        item, in order: its :class:`WriteResult`, or the error that refused that item alone (a
        secret, a bad field, the rate limit) while the others were written. More than
        :data:`quipu.memory_batch.MAX_ITEMS` items: :class:`PayloadTooLarge`
        ``too_many_items``, nothing written."""
        return remember_many(self.service, self.principal, items, scope=scope)


def _options(values: dict[str, Any]) -> dict[str, Any]:
    """A method's arguments, passed on to the use case of the same name as keywords."""
    return {name: value for name, value in values.items() if name != "self"}


def open(
    path: str | Path,
    *,
    embedder: Embedder | str | None = None,
    extractor: Extractor | str | None = None,
    **settings: Any,
) -> Quipu:
    """Open (creating if needed) a memory file. Every keyword is a setting of
    :class:`~quipu.Settings` (``embedder="none"``, ``extractor="model"`` with
    ``extractor_base_url`` and ``extractor_model``, ...); the environment is not read.
    ``embedder`` and ``extractor`` may instead be a ready :class:`Embedder` or
    :class:`Extractor`, used as is (e.g. one model shared by several stores). A job worker
    thread runs promotion, sweeps and pruning unless ``worker_embedded=False``."""
    overrides: dict[str, Any] = {**settings, "database": str(path)}
    parts: dict[str, Any] = {}
    # One place decides what each parameter is (issue 20 defect 15): a value of the setting's
    # own type is a settings override; an instance replaces what that setting would build.
    given: tuple[tuple[str, object, type], ...] = (
        ("embedder", embedder, Embedder),
        ("extractor", extractor, Extractor),
    )
    for name, value, part in given:
        if isinstance(value, part):
            parts[name] = value
        elif value is None or isinstance(value, str):
            overrides[name] = value
        else:
            raise ConfigurationError(
                f"{name} must be a setting value such as {Settings.help()[name]['default']!r} "
                f"or an {part.__name__}, not {type(value).__name__}"
            )
    resolved = load_settings(overrides, environ={})
    service = build_service(resolved, parts.get("embedder"))
    runtime = build_runtime(resolved, service, extractor=parts.get("extractor"))
    if resolved.worker_embedded:
        runtime.worker.start()
    client = Quipu(runtime, local_principal(resolved))
    _close_at_exit(client)
    return client


def _close_at_exit(client: Quipu) -> None:
    """Close ``client`` when the interpreter exits if its owner did not: its background threads
    (search pool, usage recorder, worker) then stop before the runtime tears down the native
    libraries under them, where a thread still inside ONNX Runtime aborted the process
    ("terminate called without an active exception", exit status 134, about one exit in six).
    Held by a weak reference, so an abandoned client is still collected."""
    found = weakref.ref(client)

    def close() -> None:
        alive = found()
        if alive is not None:
            alive.close()

    atexit.register(close)
