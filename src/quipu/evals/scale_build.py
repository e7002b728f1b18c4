"""The store builder of `quipu bench scale` (issue 23): many rows through the store's batch
insert path, in large transactions, on either backend.

Every row is a real dialogue turn (or a variant of one, :meth:`quipu.evals.scale.Corpus.rows`)
with the real model's vector of that turn, written by :meth:`Store.insert_batch` as a
``remember`` writes it: admitted, checked against live exact duplicates and the quota, with its
graph mirror (the deterministic extractor's entities and facts) in the same transaction. What
is shared is only what is the same by construction: a turn's vector is computed once and kept
in the cache (a text that recurs in another tenant is the same text), and so is the extraction
of a text already read (the extractor is a pure function of the text). One transaction holds
about :data:`TX_ROWS` rows (many small tenants, or a slice of one large scope), so a build
commits a few hundred times for a million rows instead of once per row or per tenant.

A scope already holding its rows is not written again: a store can be built once and measured
many times, and an interrupted build resumes where it stopped (each transaction is whole).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from quipu.core.auth import Actor
from quipu.core.graph import Extraction, GraphDraft
from quipu.core.records import MemoryVersion, Scope, ScopeRef
from quipu.evals.perf import imported_fact
from quipu.graph.extract import extract
from quipu.storage.base import Store
from quipu.storage.batch import BatchRow
from quipu.storage.graph_rows import source_of

__all__ = ["TX_ROWS", "Row", "Rows", "Writer", "agent_scope", "tenant_name", "tenant_rows"]

#: Rows per transaction of a build.
TX_ROWS = 20_000
#: Extractions kept for texts met again (the corpus's turns recur in every tenant).
_EXTRACTIONS = 50_000
_BY = Actor(key_id="bench", role="admin", agent_id="bench", surface="bench")

Row = tuple[str, datetime, npt.NDArray[np.float32]]


class Rows(Protocol):
    """What the builder reads of :class:`quipu.evals.scale.Corpus`."""

    @property
    def texts(self) -> list[str]: ...

    @property
    def observed(self) -> list[Any]: ...

    @property
    def vectors(self) -> npt.NDArray[np.float32]: ...

    def rows(self, n: int, seed: int = 23) -> Iterator[Row]: ...


def tenant_name(index: int) -> str:
    """The tenant id of the ``index``-th small tenant."""
    return f"scale-tenant-{index:04d}"


def tenant_rows(corpus: Rows, index: int, n: int) -> list[Row]:
    """The ``n`` rows of the ``index``-th small tenant: consecutive turns of the corpus starting
    ``index * n`` turns in (wrapping), so tenants hold different conversations where the corpus
    is long enough, and the same tenant gets the same rows in any store. A tenant larger than
    the corpus gets its variants (:meth:`Corpus.rows`)."""
    base = len(corpus.texts)
    if n > base:
        return list(corpus.rows(n))
    start = (index * n) % base
    picks = [(start + i) % base for i in range(n)]
    return [(corpus.texts[i], corpus.observed[i], corpus.vectors[i]) for i in picks]


class Writer:
    """Writes rows into agent scopes of a store through :meth:`Store.insert_batch`, many scopes
    per transaction; the graph mirror of each row written with it unless ``graph`` is off."""

    def __init__(self, store: Store, model_id: str, *, graph: bool = True):
        self.store = store
        self.model_id = model_id
        self.graph = graph
        self.rows_written = 0
        self.refused = 0
        self._extractions: dict[str, Extraction] = {}

    def missing(self, refs: Iterable[tuple[ScopeRef, int]]) -> list[tuple[ScopeRef, int]]:
        """The scopes holding fewer live rows than asked (the ones a build still has to write)."""
        return [(ref, n) for ref, n in refs if self.store.count_live(ref) < n]

    def write(
        self,
        scopes: Iterable[tuple[ScopeRef, Callable[[], Iterable[Row]]]],
        *,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Write each scope's rows; a transaction closes once it holds :data:`TX_ROWS` rows
        (a scope's rows may span transactions). Returns rows written, seconds and rows/s."""
        mark = time.perf_counter()
        pending: list[tuple[ScopeRef, list[BatchRow]]] = []
        size = 0
        for ref, rows in scopes:
            batch: list[BatchRow] = []
            for row in rows():
                batch.append(self._row(ref, row))
                if size + len(batch) >= TX_ROWS:
                    pending.append((ref, batch))
                    self._commit(pending)
                    pending, batch, size = [], [], 0
                    if say is not None:
                        say(f"{self.rows_written} rows written")
            if batch:
                pending.append((ref, batch))
                size += len(batch)
        if pending:
            self._commit(pending)
        seconds = time.perf_counter() - mark
        return {
            "rows_written": self.rows_written,
            "seconds": round(seconds, 1),
            "rows_per_s": round(self.rows_written / seconds, 1) if seconds else 0.0,
        }

    def _row(self, ref: ScopeRef, row: Row) -> BatchRow:
        text, observed, vector = row
        memory = imported_fact(
            ref.tenant_id, ref.owner, text, at=observed, model=self.model_id,
            memory_id=_memory_id(ref, text),
        )  # fmt: skip
        draft = GraphDraft(extract, "new", text, self._extraction(text)) if self.graph else None
        return BatchRow(_observed(memory, observed), vector, None, draft)

    def _extraction(self, text: str) -> Extraction:
        known = self._extractions.get(text)
        if known is None:
            if len(self._extractions) >= _EXTRACTIONS:
                self._extractions.clear()
            known = self._extractions[text] = extract(text)
        return known

    def _commit(self, pending: list[tuple[ScopeRef, list[BatchRow]]]) -> None:
        rows = [(row.memory, row.vector) for _, batch in pending for row in batch]
        written = self.store.import_versions(rows)  # one transaction (PostgreSQL: one COPY)
        self.rows_written += written
        self.refused += len(rows) - written
        if not self.graph:
            return
        now = datetime.now(UTC)
        with self.store.transaction():  # the graph mirror an import writes (GRAPH-1), at once
            for ref, batch in pending:
                for row in batch:
                    assert row.graph is not None and row.graph.extraction is not None
                    self.store.graph_write(
                        ref, row.graph.extraction, source_of(row.memory), now, None, fill=True
                    )


def _memory_id(ref: ScopeRef, text: str) -> str:
    """The same id for the same text in the same scope of any store (so two stores' recall
    pages can be compared id by id)."""
    seed = f"{ref.tenant_id}\x1f{ref.owner}\x1f{text}".encode()
    return hashlib.sha256(seed).hexdigest()[:24]


def _observed(memory: MemoryVersion, at: datetime) -> MemoryVersion:
    return replace(memory, observed_at=at)


def agent_scope(tenant_id: str, owner: str) -> ScopeRef:
    """``owner``'s agent scope in ``tenant_id``."""
    return ScopeRef(tenant_id, Scope.AGENT, owner)
