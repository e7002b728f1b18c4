"""An operator reads the entity graph of any subject of its tenant (GRAPH-1, OPS-4): what the
console's entities screen, entity page and a memory's "entities and facts" show.

The API's graph reads (:class:`~quipu.graph.service.GraphService`) cover the caller's own
scope. An operator instead names a subject (a scope and its owner, as on the console's Subjects
list), like :class:`quipu.inspection.Inspection` does for sessions: admins and superadmins of
the tenant only (403 ``forbidden``), every read audited as ``graph.inspect`` (SAFE-4), and an
entity of another tenant, scope or owner is the one 404 (SCOPE-7). Entities are listed while an
active memory names them and facts are read while their source memory is active, as the graph
reads them for agents; a memory's own page shows what it put in the graph in any status.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quipu.core import validate
from quipu.core.graph import MAX_NAME_CHARS, Entity, Fact, folded_name, ontology_name
from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.core.scopes import parse_scope, resolve_scope
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.graph.service import HOP_FACTS, FactView, GraphService
from quipu.guard import not_found
from quipu.storage.timecodec import from_micros, to_micros

#: An entities page holds at most this many rows (default :data:`ENTITY_PAGE`).
MAX_ENTITY_PAGE = 200
ENTITY_PAGE = 50
#: Current facts are counted up to this many per entity and side (a hub shows "1000+").
COUNT_CAP = 1000
#: A memory's page shows at most this many of its entities and of its facts.
MEMORY_ROWS = 200
#: An entity's page shows at most this many facts, newest recorded first (of the
#: :data:`~quipu.graph.service.HOP_FACTS` read; ``total`` says how many there were).
FACTS_SHOWN = 200


@dataclass(frozen=True)
class EntityRow:
    entity: Entity
    current_facts: int
    capped: bool


@dataclass
class EntityPage:
    """One page of a subject's entities and the cursor of the next (None: the last)."""

    ref: ScopeRef
    rows: list[EntityRow]
    next_cursor: str | None


@dataclass
class EntityView:
    """One entity with its facts (as subject or object) in force now, ``as_of``, or every one
    recorded; ``closers`` holds the facts that closed shown facts, by their id (a shown
    fact's ``invalidated_by``), when the closer's source memory is still active."""

    ref: ScopeRef
    entity: Entity
    facts: list[FactView]
    closers: dict[str, FactView] = field(default_factory=dict)
    as_of: datetime | None = None
    include_invalidated: bool = False
    total: int = 0


@dataclass
class MemoryGraph:
    """What one memory put in the graph: the entities it names and the facts read from it."""

    entities: list[Entity]
    facts: list[FactView]


class GraphInspection(GraphService):
    """The graph's operator reads (console). Built on the memory service like the API's."""

    def entities(
        self,
        principal: Principal,
        *,
        scope: object,
        owner: object,
        types: list[str] | None = None,
        prefix: object = None,
        cursor: str | None = None,
        limit: object = None,
    ) -> EntityPage:
        """A subject's entities named by an active memory, the most recently seen first,
        each with its number of current facts; filtered by type and by the start of the
        name. Audited as ``graph.inspect``."""
        _need_operator(principal)
        ref = operator_ref(principal, scope, owner)
        wanted = sorted({ontology_name(t, field="type") for t in types or []})
        start = _prefix(prefix)
        size = (
            ENTITY_PAGE
            if limit is None
            else validate.bounded_int(limit, field="limit", low=1, high=MAX_ENTITY_PAGE)
        )
        before = None if cursor is None else _decode_cursor(cursor)
        found = self.store.graph_entity_list(
            ref, types=wanted, prefix=start, before=before, limit=size + 1, count_cap=COUNT_CAP
        )
        page = found[:size]
        rows = [EntityRow(e, n, n >= COUNT_CAP) for e, n in page]
        more = len(found) > size
        nxt = _encode_cursor(page[-1][0]) if more and page else None
        self.guard.audit(
            principal,
            "graph.inspect",
            (),
            details={
                "scope": ref.scope.value,
                "owner": ref.owner,
                "count": len(rows),
                "types": wanted,
                "prefix": start is not None,
            },
        )
        return EntityPage(ref, rows, nxt)

    def entity(
        self,
        principal: Principal,
        entity_id: object,
        *,
        scope: object,
        owner: object,
        as_of: object = None,
        include_invalidated: bool = False,
    ) -> EntityView:
        """One entity of a subject and its facts: in force now, or ``as_of``, or with
        ``include_invalidated`` every fact recorded (closed ones with what closed them).
        404 ``not_found`` for an id no active memory of this subject names. Audited as
        ``graph.inspect``."""
        _need_operator(principal)
        ref = operator_ref(principal, scope, owner)
        ident = validate.identifier(entity_id, field="entity_id")
        at = validate.instant(as_of, field="as_of")
        found = self.store.graph_entities(ref, [ident])
        if not found or not self.store.graph_mentions(ref, [ident], 1):
            raise NotFound(f"no entity {ident}", details={"entity_id": ident})
        entity = found[0]
        if at is None and not include_invalidated:  # now: the open facts only
            every = self.store.graph_open_facts(ref, ident, HOP_FACTS)
        else:
            every = self.store.graph_facts(ref, [ident], HOP_FACTS)
        shown = [f for f in every if include_invalidated or f.in_force(at)]
        known = {entity.entity_id: entity}
        views = self._views(ref, shown, known, group=not include_invalidated)
        total = len(views)
        views = views[:FACTS_SHOWN]
        closers = self._closers(ref, views, every, known)
        self.guard.audit(
            principal,
            "graph.inspect",
            (ident,),
            details={
                "scope": ref.scope.value,
                "owner": ref.owner,
                "as_of": None if at is None else at.isoformat(),
                "include_invalidated": include_invalidated,
            },
        )
        return EntityView(ref, entity, views, closers, at, include_invalidated, total)

    def memory_graph(self, principal: Principal, memory_id: object) -> MemoryGraph:
        """The entities one memory of the tenant names and the facts read from it (open and
        closed), for the memory's page, whose own read is the audited one."""
        _need_operator(principal)
        ident = validate.identifier(memory_id, field="id")
        ref = self.store.locate(principal.tenant_id, ident)
        if ref is None:
            raise not_found(ident)
        entities, facts = self.store.graph_memory_rows(ref, ident, MEMORY_ROWS)
        known = {e.entity_id: e for e in entities}
        return MemoryGraph(entities, self._views(ref, facts, known, group=False))

    def _closers(
        self, ref: ScopeRef, views: list[FactView], every: list[Fact], known: dict[str, Entity]
    ) -> dict[str, FactView]:
        wanted = {v.fact.invalidated_by for v in views if v.fact.invalidated_by}
        if not wanted:
            return {}
        closing = [f for f in every if f.fact_id in wanted]
        return {v.fact.fact_id: v for v in self._views(ref, closing, known, group=False)}


def operator_ref(principal: Principal, scope: object, owner: object) -> ScopeRef:
    """The partition an operator names: a scope and its owner (``agent\\x1fuser`` for
    agent_user), in the operator's tenant; the global scope for superadmins."""
    kind = parse_scope(scope if isinstance(scope, str) else "")
    if kind is Scope.GLOBAL:
        return resolve_scope(principal, kind)
    if not isinstance(owner, str):
        raise InvalidInput("owner must be a string", code="invalid_id", details={"field": "owner"})
    parts = owner.split("\x1f")
    if len(parts) != (2 if kind is Scope.AGENT_USER else 1):
        raise InvalidInput(
            "an agent_user owner is agent\\x1fuser, any other owner one id",
            code="invalid_id",
            details={"field": "owner"},
        )
    for part in parts:
        validate.identifier(part, field="owner")
    return ScopeRef(principal.tenant_id, kind, owner)


def _need_operator(principal: Principal) -> None:
    if principal.role not in (Role.ADMIN, Role.SUPERADMIN):
        raise Forbidden("reading another subject's graph needs an admin key")


def _prefix(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
        raise InvalidInput(
            f"the name prefix is at most {MAX_NAME_CHARS} characters",
            code="invalid_prefix",
            details={"field": "prefix"},
        )
    folded = folded_name(validate.clean_string(value, "prefix"))
    return folded or None


def _encode_cursor(entity: Entity) -> str:
    raw = json.dumps([to_micros(entity.last_seen), entity.entity_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(token: str) -> tuple[datetime, str]:
    try:
        if len(token) > 200:
            raise ValueError
        raw: Any = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not (isinstance(raw, list) and len(raw) == 2 and type(raw[0]) is int):
            raise ValueError
        at = from_micros(raw[0])
        ident = validate.identifier(raw[1], field="cursor")
    except (ValueError, TypeError, OverflowError, InvalidInput, UnicodeDecodeError):
        raise InvalidInput(
            "the cursor is not one this server issued", code="invalid_cursor"
        ) from None
    return at, ident
