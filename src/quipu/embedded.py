"""The embedded library client: ``quipu.open(path)`` (API-1).

One process, one SQLite file, the trusted local principal. Every method is the service's use
case with identity filled in; the HTTP client of the multi-tenant server mirrors these names.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from quipu.composition import build_runtime, build_service, load_settings, local_principal
from quipu.core.jobs import Job
from quipu.core.query import Page, RecallResult
from quipu.core.records import MemoryVersion, Principal, WriteResult
from quipu.core.sessions import SessionTurn
from quipu.embeddings.base import Embedder
from quipu.extraction.base import Extractor
from quipu.runtime import Runtime
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
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    **settings: Any,
) -> Quipu:
    """Open (creating if needed) a memory file. ``settings`` override any Settings field;
    ``embedder`` / ``extractor`` replace the configured ones (e.g. one shared model). A job
    worker thread runs promotion, sweeps and pruning unless ``worker_embedded=False``."""
    resolved = load_settings({**settings, "database": str(path)}, environ={})
    service = build_service(resolved, embedder)
    runtime = build_runtime(resolved, service, extractor=extractor)
    if resolved.worker_embedded:
        runtime.worker.start()
    return Quipu(runtime, local_principal(resolved))
