"""A batch of new memories written in one transaction (issue 24, promotion cost): the rows of
:meth:`~quipu.storage.base.Store.insert_batch`, backend-neutral."""

from __future__ import annotations

from dataclasses import dataclass

from quipu.core.graph import GraphDraft
from quipu.core.records import MemoryVersion, WriteResult
from quipu.errors import LimitExceeded
from quipu.retrieval.vectors import Vector


@dataclass(frozen=True)
class BatchRow:
    """One new memory of a batch, as :meth:`Store.insert` takes it."""

    memory: MemoryVersion
    vector: Vector | None = None
    embedding_key: str | None = None
    graph: GraphDraft | None = None


#: What each row of a batch came to: written (``created``), the live exact duplicate it met
#: (not created), or the quota refusal it met (the other rows go on).
BatchOutcome = WriteResult | LimitExceeded
