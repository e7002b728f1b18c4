"""The entity graph methods of :class:`quipu.Client` and :class:`quipu.AsyncClient` (issue 26,
GRAPH-1): ``graph_recall``, ``graph_facts``, ``graph_ontology`` and the entity merges
(``graph_merge``, ``graph_merge_revert``, ``graph_entity_history``), with the names, arguments
and answers (the JSON of ``GET /v1/graph/...``, as plain dicts) of the embedded
:class:`quipu.Quipu`. Each request is spelled once (:func:`recall_call`, ...); the two mixins
differ only in awaiting it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from quipu import wire
from quipu.core import validate
from quipu.wire import Call, Instant

T = TypeVar("T")


def _same(data: Any) -> dict[str, Any]:
    return dict(data)


def recall_call(params: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("GET", "/v1/graph/recall", _same, params=params)


def facts_call(params: dict[str, Any]) -> Call[dict[str, Any]]:
    if isinstance(params.get("include_invalidated"), bool):
        params["include_invalidated"] = "true" if params["include_invalidated"] else "false"
    return Call("GET", "/v1/graph/facts", _same, params=params)


def ontology_call(
    types: Sequence[str] | None, predicates: Sequence[str] | None
) -> Call[dict[str, Any]]:
    if types is None and predicates is None:
        return Call("GET", "/v1/graph/ontology", _same)
    body = wire.given({"types": types, "predicates": predicates})
    return Call("POST", "/v1/graph/ontology", _same, json={k: list(v) for k, v in body.items()})


def merge_call(body: dict[str, Any]) -> Call[dict[str, Any]]:
    for field in ("keep", "merge"):  # refused here as the server would (never sent unencodable)
        validate.identifier(body.get(field), field=field)
    return Call("POST", "/v1/graph/merges", _same, json=body)


def revert_call(merge_id: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    ident = quote(validate.identifier(merge_id, field="merge_id"), safe="")
    return Call("POST", f"/v1/graph/merges/{ident}/revert", _same, json=body)


def history_call(entity_id: str, scope: str) -> Call[dict[str, Any]]:
    ident = quote(validate.identifier(entity_id, field="entity"), safe="")
    path = f"/v1/graph/entities/{ident}/history"
    return Call("GET", path, _same, params={"scope": scope})


class GraphCalls:
    """The entity graph on :class:`quipu.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def graph_recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        hops: int = 1,
        limit: int | None = None,
        as_of: Instant | None = None,
    ) -> dict[str, Any]:
        """The entities ``query`` names in one scope and the facts within ``hops`` (0-2)."""
        return self._send(recall_call(wire.given(locals())))

    def graph_facts(
        self,
        subject: str,
        *,
        scope: str = "agent",
        as_of: Instant | None = None,
        include_invalidated: bool = False,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """What is known about ``subject`` (a name, alias or entity id) in one scope."""
        return self._send(facts_call(wire.given(locals())))

    def graph_ontology(
        self, *, types: Sequence[str] | None = None, predicates: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """The tenant's entity types and single-valued predicates; with ``types`` or
        ``predicates``, add them first (admin keys)."""
        return self._send(ontology_call(types, predicates))

    def graph_merge(
        self, keep: str, merge: str, *, scope: str = "agent", reason: str | None = None
    ) -> dict[str, Any]:
        """Merge entity ``merge`` into entity ``keep`` (entity ids of one scope): a new version
        of ``keep``; reversible with :meth:`graph_merge_revert`."""
        return self._send(merge_call(wire.given(locals())))

    def graph_merge_revert(
        self, merge_id: str, *, scope: str = "agent", reason: str | None = None
    ) -> dict[str, Any]:
        """Undo an entity merge: the merged entity returns with its facts and mentions."""
        return self._send(revert_call(merge_id, wire.given(locals(), leave_out=("merge_id",))))

    def graph_entity_history(self, entity_id: str, *, scope: str = "agent") -> dict[str, Any]:
        """An entity's old versions, oldest first (what each merge or revert replaced)."""
        return self._send(history_call(entity_id, scope))


class AsyncGraphCalls:
    """The methods of :class:`GraphCalls` on :class:`quipu.AsyncClient`, awaited."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def graph_recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        hops: int = 1,
        limit: int | None = None,
        as_of: Instant | None = None,
    ) -> dict[str, Any]:
        return await self._send(recall_call(wire.given(locals())))

    async def graph_facts(
        self,
        subject: str,
        *,
        scope: str = "agent",
        as_of: Instant | None = None,
        include_invalidated: bool = False,
        limit: int | None = None,
    ) -> dict[str, Any]:
        return await self._send(facts_call(wire.given(locals())))

    async def graph_ontology(
        self, *, types: Sequence[str] | None = None, predicates: Sequence[str] | None = None
    ) -> dict[str, Any]:
        return await self._send(ontology_call(types, predicates))

    async def graph_merge(
        self, keep: str, merge: str, *, scope: str = "agent", reason: str | None = None
    ) -> dict[str, Any]:
        return await self._send(merge_call(wire.given(locals())))

    async def graph_merge_revert(
        self, merge_id: str, *, scope: str = "agent", reason: str | None = None
    ) -> dict[str, Any]:
        body = wire.given(locals(), leave_out=("merge_id",))
        return await self._send(revert_call(merge_id, body))

    async def graph_entity_history(self, entity_id: str, *, scope: str = "agent") -> dict[str, Any]:
        return await self._send(history_call(entity_id, scope))
