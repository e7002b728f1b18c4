"""`quipu reindex --corpus`: the documents plane re-embedded with a progress bar per corpus
(:mod:`quipu.documents_reindex`)."""

from __future__ import annotations

from typing import Any

from rich.progress import Progress, TaskID

from quipu.core.records import ScopeRef
from quipu.documents import DocumentService
from quipu.documents_reindex import reindex_corpora
from quipu.memories import MemoryService


def reindex_corpus(service: MemoryService, every: bool, bar: Progress) -> dict[str, Any]:
    documents = DocumentService(service)
    tasks: dict[ScopeRef, TaskID] = {}

    def shown(ref: ScopeRef, total: int, done: int) -> None:
        if ref not in tasks:
            name = f"{ref.tenant_id}/{ref.scope.value}"
            tasks[ref] = bar.add_task(name, total=total)
        bar.update(tasks[ref], completed=done)

    try:
        with bar:
            return reindex_corpora(documents, every=every, progress=shown)
    finally:
        documents.close()
