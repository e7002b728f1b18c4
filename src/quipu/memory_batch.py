"""Many new memories of one scope in one store transaction (issue 24, promotion cost).

:func:`remember_batch` is :meth:`MemoryService.remember` for a list of texts that share a
principal and a scope — a promotion's episodes. Each row gets what ``remember`` gives one: the
text validated, the write admitted (rate limit), the secret screen (a refused row is refused
alone, in its slot), the injection screen (such a row is stored ``quarantined``), a live exact
duplicate reported and corroborated instead of written, the owner quota, the graph mirror with
the row, a near duplicate corroborated. The difference is the cost: the rows go to the store
in one :meth:`~quipu.storage.base.Store.insert_batch` (one transaction: any failure leaves none
of them), and each record is screened once (:func:`quipu.storage.admission.verdicts`), where
one ``remember`` per row walked every record three times and committed once per row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from quipu.core import validate
from quipu.core.auth import Actor
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Principal,
    Provenance,
    Relation,
    ScopeRef,
    Source,
    Status,
    Trust,
    TurnRef,
    WriteResult,
)
from quipu.core.scopes import check_write, resolve_scope
from quipu.core.text import content_hash, embedding_key
from quipu.corroboration import UNVERIFIED_SOURCES, corroborate, corroborate_near
from quipu.errors import LimitExceeded, QuipuError
from quipu.memories import LONG_TEXT, MemoryService
from quipu.storage.admission import verdicts
from quipu.storage.batch import BatchRow


@dataclass(frozen=True)
class NewMemory:
    """One row of :func:`remember_batch` (the fields a promotion sets)."""

    text: str
    kind: str = Kind.FACT.value
    confidence: float = 1.0
    source: str = Source.EXPLICIT.value
    session_id: str | None = None
    observed_at: datetime | None = None
    turn: TurnRef | None = None


#: Each row's result: written or its live exact duplicate, or the error that refused it alone.
Outcome = WriteResult | QuipuError


def remember_batch(
    service: MemoryService,
    principal: Principal,
    items: Sequence[NewMemory],
    *,
    scope: str,
    defer_embedding: bool = False,
) -> list[Outcome]:
    """Store ``items`` in ``scope`` as ``remember`` would store each (see the module
    docstring); one result per item, in order. Errors that are not a row's own — the store
    unreachable, a row failing inside the transaction — raise, and then nothing was written."""
    ref = resolve_scope(principal, scope)
    check_write(principal, ref)
    out: list[Outcome | None] = [None] * len(items)
    drafted: list[tuple[int, MemoryVersion]] = []
    quota = service.limits.quota_per_owner
    by = Actor.of(principal)
    with verdicts():  # each record walked and screened once, here and in the store
        for n, item in enumerate(items):
            try:
                drafted.append((n, _draft(service, principal, ref, item)))
            except QuipuError as exc:
                out[n] = exc
        rows: list[BatchRow] = []
        for _, first in drafted:
            memory = first
            vector = (
                None if defer_embedding else service.embed_for_write(ref.tenant_id, memory.text)
            )
            if vector is not None and service.embedder is not None:
                memory = replace(memory, embedding_model=service.embedder.model_id)
            rows.append(
                BatchRow(
                    memory,
                    vector,
                    embedding_key(memory.text) if vector is not None else None,
                    service.graph_draft("new", memory.text),
                )
            )
        if _places(service, ref):  # GRAPH-2 places row by row (each a savepoint)
            results = _placed(service, principal, ref, rows, by)
        else:
            results = list(service.store.insert_batch(ref, rows, quota, by=by))
    for (n, _), row, result in zip(drafted, rows, results, strict=True):
        out[n] = _settled(service, principal, ref, row, result)
    return [o for o in out if o is not None]


def _draft(
    service: MemoryService, principal: Principal, ref: ScopeRef, item: NewMemory
) -> MemoryVersion:
    """The row's first version, validated, admitted and screened as ``remember`` does."""
    lim = service.limits
    body = validate.text(item.text, max_bytes=lim.max_text_bytes, instead=LONG_TEXT)
    service.guard.admit_write(principal)
    source = validate.enum(Source, item.source, field="source")
    now = service._clock()
    provenance = Provenance(
        surface=principal.surface,
        key_id=principal.key_id,
        session_id=validate.optional_id(item.session_id, field="session_id"),
        agent_id=principal.agent_id,
        **(item.turn.provenance() if item.turn is not None else {}),
    )
    memory = MemoryVersion(
        id=uuid.uuid4().hex,
        version=1,
        tenant_id=ref.tenant_id,
        scope=ref.scope,
        owner=ref.owner,
        project=None,
        text=body,
        kind=validate.enum(Kind, item.kind, field="kind"),
        status=Status.ACTIVE,
        confidence=validate.confidence(item.confidence),
        source=source,
        trust=Trust.UNVERIFIED if source in UNVERIFIED_SOURCES else Trust.VERIFIED,
        tags=(),
        metadata={},
        aliases=(),
        provenance=provenance,
        observed_at=validate.instant(item.observed_at, field="observed_at"),
        valid_at=now,
        invalid_at=None,
        recorded_at=now,
        content_hash=content_hash(body),
        embedding_model=None,
        relation=Relation.CREATED,
        actor=principal.key_id,
    )
    service.guard.screen(memory)  # SAFE-1: a secret refuses this row alone
    if service.guard.injected(memory):  # SAFE-2: stored, out of every read path
        memory = replace(memory, status=Status.QUARANTINED)
    return memory


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
