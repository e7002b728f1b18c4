"""Versioned, reversible entity merges (GRAPH-1): the use cases over
:mod:`quipu.storage.graph_merge`.

``merge(keep, merge)`` folds entity ``merge`` into ``keep`` within one scope: ``keep`` gets a
new version (the other's name and aliases become its aliases), every fact and mention of
``merge`` now names ``keep``, and ``merge`` is gone from reads. ``revert(merge_id)`` restores
both (a new version of ``keep`` again; history keeps every old version). Both are writes to the
caller's scope (the tenant scope needs the tenant write grant), rate limited like any write and
audited as ``graph.merge`` / ``graph.merge_revert``.
"""

from __future__ import annotations

import uuid
from typing import Any

from quipu.core import validate
from quipu.core.records import Principal
from quipu.core.scopes import check_write, resolve_scope
from quipu.graph.service import GraphService
from quipu.guard import reason as reason_text


class GraphMerges:
    """Entity merges over a :class:`GraphService`'s store, guard and clock."""

    def __init__(self, graph: GraphService) -> None:
        self.graph = graph

    def merge(
        self,
        principal: Principal,
        keep: object,
        merge: object,
        *,
        scope: str = "agent",
        reason: object = None,
    ) -> dict[str, Any]:
        """Merge entity ``merge`` into entity ``keep`` (entity ids of the scope): 404
        ``not_found`` for an id the scope lacks, 422 ``invalid_id`` / ``invalid_merge``."""
        kept_id = validate.identifier(keep, field="keep")
        merged_id = validate.identifier(merge, field="merge")
        why = reason_text(reason)
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        self.graph.guard.admit_write(principal)
        merge_id = uuid.uuid4().hex
        kept, record = self.graph.store.graph_merge(
            ref, kept_id, merged_id, merge_id, self.graph.clock(), principal.key_id, why
        )
        self.graph.guard.audit(
            principal,
            "graph.merge",
            (kept_id, merged_id),
            reason=why,
            details={"merge_id": merge_id, "version": record.kept_version},
        )
        return {"entity": kept.to_dict(), "version": record.kept_version, **record.to_dict()}

    def revert(
        self, principal: Principal, merge_id: object, *, scope: str = "agent", reason: object = None
    ) -> dict[str, Any]:
        """Undo merge ``merge_id``: 404 ``not_found``; 409 ``merge_reverted`` (already undone)
        or ``merge_conflict`` (a later merge of the kept entity is still in force)."""
        ident = validate.identifier(merge_id, field="merge_id")
        why = reason_text(reason)
        ref = resolve_scope(principal, scope)
        check_write(principal, ref)
        self.graph.guard.admit_write(principal)
        kept, back = self.graph.store.graph_merge_revert(
            ref, ident, self.graph.clock(), principal.key_id
        )
        self.graph.guard.audit(
            principal,
            "graph.merge_revert",
            (kept.entity_id, back.entity_id),
            reason=why,
            details={"merge_id": ident},
        )
        return {"merge_id": ident, "entity": kept.to_dict(), "restored": back.to_dict()}

    def history(
        self, principal: Principal, entity: object, *, scope: str = "agent"
    ) -> dict[str, Any]:
        """An entity's old versions, oldest first (what each merge or revert replaced)."""
        ident = validate.identifier(entity, field="entity")
        ref = resolve_scope(principal, scope)
        return {
            "entity_id": ident,
            "versions": self.graph.store.graph_entity_history(ref, ident),
        }
