"""The embedding backfill (issue 24, promotion cost): the ``embed_pending`` job gives every
current row stored without a vector its vector, in batches, and then does what a write with a
vector would have done at once: a promoted (unverified) row that restates, in near-identical
meaning, an unverified row of another session corroborates it, and is corroborated by it
(CONSOL-3, :func:`quipu.corroboration.corroborate_near`).

Promotion writes its episodes without a vector and enqueues this job, so a session's promotion
does not wait for the model on every turn; once the job has run, the store holds what an
inline write would have left (the same vectors, the same corroborations)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from quipu.core.records import Principal, Role, ScopeRef, Status, Trust, WriteResult
from quipu.core.text import embedding_key
from quipu.corroboration import UNVERIFIED_SOURCES, corroborate_near
from quipu.memories import MemoryService

#: Rows embedded per model call.
BATCH = 64


def embed_pending(
    memory: MemoryService,
    *,
    batch: int = BATCH,
    clock: Callable[[], datetime] | None = None,
) -> dict[str, int]:
    """Embed every current row without a vector; ``embedded`` rows, of which ``corroborated``
    were verified (or verified another row) on the way."""
    embedder = memory.embedder
    if embedder is None:
        return {"embedded": 0, "corroborated": 0}
    now = clock or (lambda: datetime.now(UTC))
    store = memory.store
    quota = memory.limits.quota_per_owner
    embedded = corroborated = 0
    while True:
        rows = store.missing_vectors(batch)
        if not rows:
            return {"embedded": embedded, "corroborated": corroborated}
        vectors = embedder.embed_batch([text for _, _, text in rows])
        store.attach_vectors(
            embedder.model_id,
            [(key, embedding_key(text), vectors[i]) for i, (key, _, text) in enumerate(rows)],
        )
        embedded += len(rows)
        loaded = store.load([key for key, _, _ in rows])
        for i, (key, _, _) in enumerate(rows):
            row = loaded.get(key)
            if (
                row is None
                or not row.is_current
                or row.status is not Status.ACTIVE
                or row.source not in UNVERIFIED_SOURCES
                or row.trust is not Trust.UNVERIFIED
            ):
                continue
            writer = Principal(
                row.tenant_id,
                row.provenance.key_id or row.actor,
                Role.AGENT,
                agent_id=row.provenance.agent_id,
                surface=row.provenance.surface or "promotion",
            )
            ref = ScopeRef(row.tenant_id, row.scope, row.owner)
            after = corroborate_near(
                store, now, quota, writer, ref, WriteResult(row, created=True), vectors[i]
            )
            corroborated += int(after.trust is not row.trust)
