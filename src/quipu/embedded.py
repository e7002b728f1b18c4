"""The embedded library client: ``quipu.open(path)`` (API-1).

One process, one SQLite file, the trusted local principal. Every method is the service's use
case with identity filled in; the HTTP client of the multi-tenant server mirrors these names.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from quipu.composition import build_runtime, build_service, load_settings, local_principal
from quipu.core import validate
from quipu.core.auth import AuditEvent
from quipu.core.governance import Hold, Project, Snapshot
from quipu.core.jobs import Job
from quipu.core.query import Page, RecallResult
from quipu.core.records import MemoryVersion, Principal, WriteResult
from quipu.core.sessions import SessionTurn
from quipu.embeddings.base import Embedder
from quipu.errors import ConfigurationError
from quipu.extraction.base import Extractor
from quipu.governance import Erased, GovernanceService, Resolved
from quipu.runtime import Runtime
from quipu.settings import Settings
from quipu.storage.base import Vector


class Session:
    """One conversation's short-term memory (SESSION-1..3) and its promotion (PROMO-1)."""

    def __init__(self, owner: Quipu, session_id: str) -> None:
        self._owner = owner
        self.session_id = session_id

    def append(self, role: str, content: str, **options: Any) -> SessionTurn:
        return self._owner.runtime.sessions.append(
            self._owner.principal, self.session_id, role, content, **options
        )

    def history(self, **options: Any) -> builtins.list[SessionTurn]:
        return self._owner.runtime.sessions.history(
            self._owner.principal, self.session_id, **options
        )

    def promote(self, *, wait: bool = False) -> Job:
        """Queue promotion into long-term memory; with ``wait`` run due jobs here first."""
        job, _ = self._owner.runtime.sessions.promote(self._owner.principal, self.session_id)
        if wait:
            self._owner.runtime.worker.drain()
            found = self._owner.runtime.queue.store.get_job(job.job_id)
            if found is not None:
                job = found
        return job


class Quipu:
    """A memory store opened in this process. Thread-safe; close it (or use ``with``)."""

    def __init__(self, runtime: Runtime, principal: Principal) -> None:
        self.runtime = runtime
        self.service = runtime.service
        self.principal = principal

    def session(self, session_id: str) -> Session:
        return Session(self, session_id)

    def remember(self, text: str, **options: Any) -> MemoryVersion:
        """Store ``text``; returns the memory (the existing one for an exact duplicate)."""
        return self.service.remember(self.principal, text, **options).memory

    def remember_result(self, text: str, **options: Any) -> WriteResult:
        """Like :meth:`remember`, also saying whether a new memory was created."""
        return self.service.remember(self.principal, text, **options)

    def recall(self, query: str, **options: Any) -> RecallResult:
        return self.service.recall(self.principal, query, **options)

    def get(self, memory_id: str, **options: Any) -> MemoryVersion:
        return self.service.get(self.principal, memory_id, **options)

    def history(self, memory_id: str, **options: Any) -> list[MemoryVersion]:
        return self.service.history(self.principal, memory_id, **options)

    def revise(self, memory_id: str, text: str, **options: Any) -> MemoryVersion:
        return self.service.revise(self.principal, memory_id, text, **options)

    def supersede(self, old_id: str, new_id: str, **options: Any) -> MemoryVersion:
        return self.service.supersede(self.principal, old_id, new_id, **options)

    def forget(self, memory_id: str, **options: Any) -> MemoryVersion:
        return self.service.forget(self.principal, memory_id, **options)

    def set_status(self, memory_id: str, status: str, **options: Any) -> MemoryVersion:
        return self.service.set_status(self.principal, memory_id, status, **options)

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

    def review_queue(self, **options: Any) -> Page:
        return self.governance.review_queue(self.principal, **options)

    def review(
        self, memory_id: str, decision: str, *, reason: str, reviewer: str, **options: Any
    ) -> MemoryVersion:
        """Activate or reject a memory under review. Embedded mode has one principal, which
        wrote what its model proposed; ``reviewer`` names the person reviewing, recorded as
        the actor, since a writer never reviews its own candidate (LIFE-5)."""
        who = self.as_reviewer(reviewer)
        return self.governance.review(who, memory_id, decision, reason=reason, **options)

    def affirm(
        self, memory_id: str, *, reason: str, reviewer: str, **options: Any
    ) -> MemoryVersion:
        who = self.as_reviewer(reviewer)
        return self.governance.affirm(who, memory_id, reason=reason, **options)

    def refute(
        self, memory_id: str, *, reason: str, reviewer: str, **options: Any
    ) -> MemoryVersion:
        who = self.as_reviewer(reviewer)
        return self.governance.refute(who, memory_id, reason=reason, **options)

    def restore(self, memory_id: str, version: int, **options: Any) -> MemoryVersion:
        return self.governance.restore(self.principal, memory_id, version, **options)

    def merge(self, memory_ids: builtins.list[str], text: str, **options: Any) -> MemoryVersion:
        return self.governance.merge(self.principal, memory_ids, text, **options)

    def snapshot(self, **options: Any) -> Snapshot:
        """Pin versions for a run: ``ids=[...]`` or ``members=[{"id", "version"}]``."""
        return self.governance.snapshot_create(self.principal, **options)

    def resolve_snapshot(self, snapshot_id: str) -> Resolved:
        return self.governance.snapshot_resolve(self.principal, snapshot_id)

    def create_project(self, project_id: str, *, name: str | None = None) -> Project:
        return self.governance.project_create(self.principal, project_id, name=name)

    def projects(self) -> builtins.list[Project]:
        return self.governance.projects(self.principal)

    def audit(self, **options: Any) -> tuple[builtins.list[AuditEvent], str | None]:
        return self.governance.audit(self.principal, **options)

    def as_reviewer(self, reviewer: str) -> Principal:
        """The local principal acting as the named human reviewer (key ``reviewer:NAME``)."""
        name = validate.identifier(reviewer, field="reviewer")
        return replace(self.principal, key_id=f"reviewer:{name}")

    def close(self) -> None:
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

    # ``list`` last: below it, the name would shadow the builtin in annotations.
    def list(self, **options: Any) -> Page:
        return self.service.list(self.principal, **options)


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
    return Quipu(runtime, local_principal(resolved))
