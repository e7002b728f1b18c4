"""Placement by ontology (GRAPH-2): the tenant's versioned placement policy, and the write that
puts a new memory and its graph mirror in the scope the policy decides.

**Declaring.** An admin key declares the policy (:meth:`Placement.declare`): the entity types
whose facts live in the tenant scope (with the names known to be of each type) and the isolated
callers. Each declaration is a new version (``expected_version`` guards against a lost update:
409 ``version_conflict``), audited as ``graph.placement.declare`` in the same transaction.

**Writing.** :meth:`Placement.write` replaces the memory service's plain insert when the
composition root sets ``MemoryService.placement``. With no policy (or one that places nothing
in the tenant scope) it writes nothing and answers None: the memory service's own write (the
memory and its mirror in one transaction) is the only spelling of that write. Otherwise, in one
store transaction (:meth:`quipu.storage.plane_store.PlaneStore.transaction`): read the types the
writer's and tenant scopes already hold for the memory's subjects, decide
(:func:`quipu.core.placement.decide`), insert the memory row in the decided scope, write its
graph rows in the same scope, and audit the decision as ``graph.placement`` with the check that
decided it. The two halves and the audit commit together or not at all: a failure, or the
process dying, between them leaves neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from quipu.core.auth import Actor
from quipu.core.graph import Extraction, Ontology, Source, folded_name
from quipu.core.placement import Decision, Policy, decide, parse_policy, retype, subjects
from quipu.core.records import (
    MemoryVersion,
    Principal,
    Role,
    Scope,
    ScopeRef,
    Status,
    WriteResult,
)
from quipu.errors import Conflict, Forbidden, InvalidInput, NotFound
from quipu.graph.extract import extract
from quipu.graph.service import GraphService
from quipu.guard import reason as reason_text
from quipu.retrieval.vectors import Vector

#: A test-only hook called between the memory row and its graph mirror inside the transaction
#: (the crash test sets it in a child process to ``os._exit``); None in production.
fault: Callable[[str], None] | None = None


class Placement:
    """GRAPH-2 over the graph service's store and guard: ``MemoryService.placement``."""

    def __init__(self, graph: GraphService) -> None:
        self.graph = graph
        self.store = graph.store
        self.guard = graph.guard
        self._clock = graph._clock

    # -- the policy --------------------------------------------------------------------------
    def policy(self, principal: Principal, version: object = None) -> dict[str, Any]:
        """The tenant's placement policy (any key may read it): the newest version, or
        ``version``; version 0 with no types when none was declared. 404 for an unknown
        version."""
        wanted = None if version is None else _version(version, "version")
        found = self.store.placement_policy(principal.tenant_id, wanted)
        if found is None:
            if wanted is not None:
                raise NotFound(f"no placement policy version {wanted}", details={"version": wanted})
            found = Policy()
        return found.to_dict()

    def declare(
        self,
        principal: Principal,
        *,
        types: object = None,
        isolated: object = None,
        expected_version: object = None,
        reason: object = None,
    ) -> dict[str, Any]:
        """Replace the tenant's placement policy with a new version (admin keys only: 403
        ``forbidden``); see :func:`quipu.core.placement.parse_policy` for what is refused."""
        if principal.role not in (Role.ADMIN, Role.SUPERADMIN):
            raise Forbidden("declaring the placement policy needs an admin key")
        placed, ids = parse_policy(types, isolated)
        expected = None if expected_version is None else _version(expected_version, "expected")
        why = reason_text(reason)
        draft = Policy(0, placed, ids, principal.key_id, self._clock(), why)
        with self.store.transaction(principal.tenant_id):
            stored = self.store.placement_declare(principal.tenant_id, draft, expected)
            self.guard.audit(
                principal,
                "graph.placement.declare",
                (f"v{stored.version}",),
                reason=why,
                details=stored.body(),
            )
        return stored.to_dict()

    # -- the write ---------------------------------------------------------------------------
    def write(
        self,
        principal: Principal,
        ref: ScopeRef,
        memory: MemoryVersion,
        vector: Vector | None,
        key: str | None,
        by: Actor,
    ) -> tuple[ScopeRef, WriteResult] | None:
        """Store ``memory`` (written by ``principal`` for ``ref``) and its graph mirror where
        the tenant's policy places them; the scope it landed in and the insert's result. None,
        having written nothing, when the tenant has no policy or one that places nothing in the
        tenant scope: the caller's plain write (the memory and its mirror in one transaction)
        is then the whole of it, with no decision and no audit."""
        quota = self.guard.limits.quota_per_owner
        policy = self.store.placement_policy(ref.tenant_id)
        if policy is None or not policy.tenant_types:
            return None
        extraction = retype(extract(memory.text), policy)
        tenant = ScopeRef(ref.tenant_id, Scope.TENANT, ref.tenant_id)
        with self.store.transaction(ref.tenant_id):
            stored = self._stored_types(extraction, (ref, tenant))
            decision = decide(
                policy, principal, ref.scope, memory.status, extraction, stored, memory.text
            )
            target = tenant if decision.place else ref
            placed = replace(memory, scope=target.scope, owner=target.owner)
            written = self.store.insert(target, placed, vector, key, quota, by=by)
            if written.created and extraction.mentions and memory.status is Status.ACTIVE:
                if fault is not None:
                    fault("between_memory_and_graph")
                self.store.graph_write(
                    target,
                    extraction,
                    _source(written.memory),
                    self._clock(),
                    self._ontology(ref.tenant_id, policy),
                )
            if decision.place and written.created:  # a revision passes the checks again
                self.store.placement_mark(
                    ref.tenant_id, written.memory.id, ref.scope, policy.version, self._clock()
                )
            self._audit(principal, written, decision)
        return target, written

    def revise(
        self,
        principal: Principal,
        ref: ScopeRef,
        memory_id: str,
        text: str,
        write: Callable[[], MemoryVersion],
    ) -> MemoryVersion | None:
        """A revision of a placed memory (GRAPH-2): the new ``text`` passes the placement
        checks again — by the reviser, as if it were written to the scope the memory was first
        written to — and ``write()`` (the store's append, which writes the version's graph
        mirror in its transaction) runs in the same transaction as the decision's audit. None,
        having written nothing, when ``memory_id`` was not placed (the caller appends as usual).
        A check that refuses refuses the revision: 409 ``placement_refused`` naming the check,
        nothing written, the refusal audited. The text is checked whatever status the screen
        gives the version, so a reviewer's later release never brings unchecked text into the
        tenant scope."""
        if ref.scope is not Scope.TENANT:  # only a tenant memory can have been placed
            return None
        with self.store.transaction(ref.tenant_id):
            origin = self.store.placement_origin(ref.tenant_id, memory_id)
            if origin is None:
                return None
            policy = self.store.placement_policy(ref.tenant_id) or Policy()
            extraction = retype(extract(text), policy)
            tenant = ScopeRef(ref.tenant_id, Scope.TENANT, ref.tenant_id)
            stored = self._stored_types(extraction, (tenant,))
            decision = decide(policy, principal, origin, Status.ACTIVE, extraction, stored, text)
            if decision.place:
                revised = write()
                self.guard.audit(
                    principal,
                    "graph.placement",
                    (memory_id,),
                    details={**decision.audit(), "revision": revised.version},
                )
                return revised
        self.guard.audit(
            principal,
            "graph.placement",
            (memory_id,),
            details={**decision.audit(), "revision": None, "refused": True},
        )
        raise Conflict(
            "the revision of a memory placed in the tenant scope fails the placement check"
            f" {decision.check!r}: {decision.reason}",
            code="placement_refused",
            details={"check": decision.check, "memory_id": memory_id},
        )

    def _stored_types(
        self, extraction: Extraction, refs: tuple[ScopeRef, ...]
    ) -> dict[str, set[str]]:
        keys = sorted({folded_name(m.name) for m in subjects(extraction)} - {""})
        found: dict[str, set[str]] = {k: set() for k in keys}
        if not keys:
            return found
        for ref in refs:
            for entity in self.store.graph_lookup(ref, keys, []):
                for name in (entity.name, *entity.aliases):
                    if folded_name(name) in found:
                        found[folded_name(name)].add(entity.type)
        return found

    def _ontology(self, tenant_id: str, policy: Policy) -> Ontology:
        own = self.graph.ontology(tenant_id)
        return replace(own, types=own.types | {t.type for t in policy.types})

    def _audit(self, principal: Principal, written: WriteResult, decision: Decision) -> None:
        self.guard.audit(
            principal,
            "graph.placement",
            (written.memory.id,),
            details={**decision.audit(), "created": written.created},
        )


def _source(memory: MemoryVersion) -> Source:
    return Source(
        memory_id=memory.id,
        memory_version=memory.version,
        valid_at=memory.valid_at,
        observed_at=memory.observed_at,
        surface=memory.provenance.surface,
        key_id=memory.provenance.key_id,
    )


def _version(value: object, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**31:
        raise InvalidInput(
            f"{field_name} must be a version number",
            code="invalid_version",
            details={"field": field_name},
        )
    return value


class PlacementPolicy:
    """The placement policy with the caller filled in: ``Quipu.graph.placement`` style access
    for the embedded client (``read()``, ``declare(types=..., isolated=...)``)."""

    def __init__(self, placement: Placement, principal: Principal) -> None:
        self.placement = placement
        self.principal = principal

    def read(self, version: int | None = None) -> dict[str, Any]:
        return self.placement.policy(self.principal, version)

    def declare(
        self,
        *,
        types: list[dict[str, Any]] | None = None,
        isolated: list[str] | None = None,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        return self.placement.declare(
            self.principal,
            types=types,
            isolated=isolated,
            expected_version=expected_version,
            reason=reason,
        )
