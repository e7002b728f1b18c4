"""Many new memories of one scope in one store transaction: ``remember_many`` (issue 23,
ingest at defaults) and a promotion's episodes (issue 24, promotion cost).

:func:`remember_batch` is :meth:`MemoryService.remember` for a list of memories that share a
principal and a scope. Each row is drafted by the same function ``remember`` drafts with
(:func:`quipu.memory_draft.draft`: every field validated, the write admitted against the rate
limit, the secret screen, the injection screen that stores such a row ``quarantined``); a row
the draft refuses — a secret in any field, a bad field, the rate limit — is refused alone, in
its slot, with its typed error, and the other rows are written. A live exact duplicate is
reported and corroborated instead of written, the owner quota is checked per row, the graph
mirror goes with the row, a near duplicate is corroborated. The difference is the cost: the
texts are embedded together (one cache read, then :meth:`~quipu.embeddings.base.Embedder.
embed_batch`, which the bundled model runs on parallel threads), the rows go to the store in
one :meth:`~quipu.storage.base.Store.insert_batch` (one transaction: any failure there leaves
none of them), and each record is screened once (:func:`quipu.storage.admission.verdicts`).

:func:`remember_many` is the public bulk write: the same, from the wire's shape (a list of
texts or field objects), at most :data:`MAX_ITEMS` per call (``413 too_many_items``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from quipu.core.auth import Actor
from quipu.core.graph import GraphDraft
from quipu.core.records import MemoryVersion, Principal, ScopeRef, Status, WriteResult
from quipu.core.scopes import check_write, resolve_scope
from quipu.core.text import embedding_key
from quipu.corroboration import corroborate, corroborate_near
from quipu.errors import (
    InvalidInput,
    LimitExceeded,
    PayloadTooLarge,
    QuipuError,
)
from quipu.memories import MemoryService
from quipu.memory_draft import MemoryDraft, draft
from quipu.storage.admission import verdicts
from quipu.storage.base import Vector
from quipu.storage.batch import BatchRow

#: One row of :func:`remember_batch` (a promotion sets text, kind, confidence, source,
#: session_id, observed_at and turn).
NewMemory = MemoryDraft

#: Most memories one ``remember_many`` call takes: a bigger list is refused whole (413
#: ``too_many_items``) before anything is drafted. At ~250 turns/s this is well under a second
#: per call, and one transaction of this many rows holds the scope's write lock briefly.
MAX_ITEMS = 256

#: The fields an item of ``remember_many`` may give (a turn reference is the library's own).
ITEM_FIELDS = frozenset(f.name for f in fields(MemoryDraft)) - {"turn"}

#: Each row's result: written or its live exact duplicate, or the error that refused it alone.
Outcome = WriteResult | QuipuError


def remember_many(
    service: MemoryService,
    principal: Principal,
    items: object,
    *,
    scope: str = "agent",
    defer_embedding: bool = False,
) -> list[Outcome]:
    """Store each of ``items`` (texts, or objects of :data:`ITEM_FIELDS`) in ``scope`` as
    :func:`remember_batch` does; one result per item, in order: the write or the typed error
    that refused that item alone. ``items`` not a list, or longer than :data:`MAX_ITEMS`, is
    refused whole before anything is written."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidInput("items must be a list of memories", details={"field": "items"})
    if len(items) > MAX_ITEMS:
        raise PayloadTooLarge(
            f"at most {MAX_ITEMS} memories per call, got {len(items)}",
            code="too_many_items",
            details={"field": "items", "max": MAX_ITEMS, "got": len(items)},
        )
    drafts: list[MemoryDraft | QuipuError] = [_item(n, raw) for n, raw in enumerate(items)]
    return remember_batch(service, principal, drafts, scope=scope, defer_embedding=defer_embedding)


def _item(n: int, raw: object) -> MemoryDraft | QuipuError:
    """Item ``n`` as a draft's fields, or the error that refuses it."""
    if isinstance(raw, str):
        return MemoryDraft(raw)
    if not isinstance(raw, Mapping):
        return InvalidInput(
            "each item is a text or an object with a text",
            code="invalid_item",
            details={"field": f"items[{n}]"},
        )
    unknown = [k for k in raw if k not in ITEM_FIELDS]
    if unknown or "text" not in raw:
        return InvalidInput(
            "an item needs a text and takes only a memory's fields",
            code="invalid_item",
            details={"field": f"items[{n}]", "allowed": sorted(ITEM_FIELDS)},
        )
    return MemoryDraft(**{str(k): v for k, v in raw.items()})


def remember_batch(
    service: MemoryService,
    principal: Principal,
    items: Sequence[MemoryDraft | QuipuError],
    *,
    scope: str,
    defer_embedding: bool = False,
) -> list[Outcome]:
    """Store ``items`` in ``scope`` as ``remember`` would store each (see the module
    docstring); one result per item, in order (an item given as an error is that error).
    Errors that are not a row's own — the store unreachable, a row failing inside the
    transaction — raise, and then nothing was written."""
    ref = resolve_scope(principal, scope)
    check_write(principal, ref)
    out: list[Outcome | None] = [None] * len(items)
    drafted: list[tuple[int, MemoryVersion]] = []
    by = Actor.of(principal)
    with verdicts():  # each record walked and screened once, here and in the store
        now = service._clock()
        embedder = service.embedder
        model = None if defer_embedding or embedder is None else embedder.model_id
        for n, item in enumerate(items):
            if isinstance(item, QuipuError):
                out[n] = item
                continue
            try:
                memory = draft(
                    service.guard, service.limits, now, principal, ref, item, embedding_model=model
                )
                drafted.append((n, memory))
            except QuipuError as exc:
                out[n] = exc
        memories = [memory for _, memory in drafted]
        graphs: list[GraphDraft | None] = []

        def draw() -> None:  # the graph drafts, while the model embeds the texts
            graphs.extend(service.graph_draft("new", m.text) for m in memories)

        vectors = _vectors(service, ref, memories, draw, defer=defer_embedding)
        rows: list[BatchRow] = []
        for first, vector, graph in zip(memories, vectors, graphs, strict=True):
            memory = first
            if vector is None and memory.embedding_model is not None:
                memory = replace(memory, embedding_model=None)  # embedded later
            key = embedding_key(memory.text) if vector is not None else None
            rows.append(BatchRow(memory, vector, key, graph))
        if _places(service, ref):  # GRAPH-2 places row by row (each a savepoint)
            results = _placed(service, principal, ref, rows, by)
        else:
            quota = service.limits.quota_per_owner
            results = list(service.store.insert_batch(ref, rows, quota, by=by))
    for (n, _), row, result in zip(drafted, rows, results, strict=True):
        out[n] = _settled(service, principal, ref, row, result)
    return [o for o in out if o is not None]


def _vectors(
    service: MemoryService,
    ref: ScopeRef,
    memories: Sequence[MemoryVersion],
    meanwhile: Callable[[], None],
    *,
    defer: bool,
) -> list[Vector | None]:
    """Each memory's vector: the cached ones read at once, the others embedded together on a
    helper thread (the bundled model runs them on parallel threads) while ``meanwhile`` runs
    here. The embedder off, failing or ``defer``: ``None`` for those rows, embedded later by
    embed_pending, as ``remember`` does."""
    embedder = service.embedder
    if embedder is None or defer or not memories:
        meanwhile()
        return [None] * len(memories)
    keys = [embedding_key(m.text) for m in memories]
    cached = service.store.cached_embeddings(ref.tenant_id, embedder.model_id, list(set(keys)))
    pairs = list(zip(memories, keys, strict=True))
    wanted = list(dict.fromkeys(m.text for m, k in pairs if k not in cached))
    running = service.embed_later(wanted) if wanted else (lambda: None)
    meanwhile()
    matrix = running()
    made = {} if matrix is None else {text: matrix[at] for at, text in enumerate(wanted)}
    return [cached.get(k, made.get(m.text)) for m, k in pairs]


def _placed(
    service: MemoryService,
    principal: Principal,
    ref: ScopeRef,
    rows: Sequence[BatchRow],
    by: Actor,
) -> list[WriteResult | LimitExceeded]:
    """The rows written one by one where the ontology places them, in one transaction."""
    assert service.placement is not None
    out: list[WriteResult | LimitExceeded] = []
    with service.store.transaction(ref.tenant_id):
        for row in rows:
            try:
                placed = service.placement.write(
                    principal, ref, row.memory, row.vector, row.embedding_key, by
                )
                if placed is None:  # the policy places nothing: the plain write with its mirror
                    written = service.store.insert(
                        ref,
                        row.memory,
                        row.vector,
                        row.embedding_key,
                        service.limits.quota_per_owner,
                        by=by,
                        graph=row.graph,
                    )
                else:
                    written = placed[1]
            except LimitExceeded as exc:
                out.append(exc)
                continue
            out.append(written)
    return out


def _places(service: MemoryService, ref: ScopeRef) -> bool:
    """Whether the tenant's ontology may place a row elsewhere (GRAPH-2): only then is the
    batch written row by row through placement; otherwise it is one batch insert."""
    if service.placement is None:
        return False
    policy = service.store.placement_policy(ref.tenant_id)
    return policy is not None and bool(policy.tenant_types)


def _settled(
    service: MemoryService,
    principal: Principal,
    ref: ScopeRef,
    row: BatchRow,
    result: WriteResult | LimitExceeded,
) -> Outcome:
    """A stored row's result after corroboration (CONSOL-3), as ``remember`` answers it."""
    if isinstance(result, LimitExceeded):
        return result
    clock, quota = service._clock, service.limits.quota_per_owner
    if not result.created:
        existing = result.memory
        if row.memory.status is Status.ACTIVE and existing.status is Status.ACTIVE:
            existing = corroborate(
                service.store, clock, quota, principal, ref, existing, row.memory
            )
        return WriteResult(existing, created=False)
    latest = corroborate_near(service.store, clock, quota, principal, ref, result, row.vector)
    return WriteResult(latest, created=True)


def outcome_dict(index: int, outcome: Outcome, *, whole: bool = True) -> dict[str, Any]:
    """One item's result as the wire carries it: ``{"index", "status", "memory", "created"}``
    when written (status 201) or met as a live duplicate (200), ``{"index", "status",
    "error"}`` (the error envelope's body and its HTTP status) when refused. ``whole=False``
    gives the memory's id and status instead of the memory (an agent's context is small)."""
    if isinstance(outcome, QuipuError):
        return {"index": index, "status": outcome.status, **outcome.to_dict()}
    memory = outcome.memory
    shown: dict[str, Any] = (
        {"memory": memory.to_dict()}
        if whole
        else {"id": memory.id, "memory_status": memory.status.value}
    )
    return {
        "index": index,
        "status": 201 if outcome.created else 200,
        **shown,
        "created": outcome.created,
    }
