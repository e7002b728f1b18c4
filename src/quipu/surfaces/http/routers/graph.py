"""/v1/graph: the entity graph (GRAPH-1). ``graph/recall`` walks the bounded neighbourhood of
the entities a query names; ``graph/facts`` lists what is known about one subject, current or
``as_of``; ``graph/ontology`` reads and (admin keys) extends the tenant's entity types and
single-valued predicates. Each read covers exactly one scope (``scope``, default ``agent``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from quipu.core.records import Principal
from quipu.graph.merges import GraphMerges
from quipu.graph.service import GraphService
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.plane_responses import (
    GraphAnswerOut,
    GraphEntityHistoryOut,
    GraphMergeOut,
    GraphOntologyOut,
    GraphRevertOut,
)
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["graph"])
Who = Annotated[Principal, Depends(principal)]
ScopeParam = Annotated[str, Query(description="agent, user, agent_user, tenant or global.")]


async def graph_service(request: Request) -> GraphService:
    """The app's graph use cases: the memory service's own (the one it writes through), or
    one built on first use when write-time extraction is off. Async: it does no I/O."""
    service = request.app.state.service
    found = service.graph if isinstance(service.graph, GraphService) else None
    if found is None:
        found = getattr(request.app.state, "graph", None)
    if found is None:
        found = request.app.state.graph = GraphService(service)
    return found


Graph = Annotated[GraphService, Depends(graph_service)]


class DeclareBody(Body):
    types: list[str] | None = Field(None, description="Entity types to add (lowercase names).")
    predicates: list[str] | None = Field(
        None, description="Predicates to make single-valued (a new object closes the old fact)."
    )


@router.get("/graph/recall", response_model=GraphAnswerOut, summary="Walk the entity graph")
def graph_recall(
    graph: Graph,
    who: Who,
    query: str,
    scope: ScopeParam = "agent",
    hops: int = 1,
    limit: int | None = None,
    as_of: str | None = None,
) -> SafeJSONResponse:
    answer = graph.recall(who, query, scope=scope, hops=hops, limit=limit, as_of=as_of)
    return SafeJSONResponse(answer.to_dict())


@router.get("/graph/facts", response_model=GraphAnswerOut, summary="List facts about a subject")
def graph_facts(
    graph: Graph,
    who: Who,
    subject: str,
    scope: ScopeParam = "agent",
    as_of: str | None = None,
    include_invalidated: bool = False,
    limit: int | None = None,
) -> SafeJSONResponse:
    answer = graph.facts(
        who,
        subject,
        scope=scope,
        as_of=as_of,
        include_invalidated=include_invalidated,
        limit=limit,
    )
    return SafeJSONResponse(answer.to_dict())


@router.get("/graph/ontology", response_model=GraphOntologyOut, summary="The tenant's ontology")
def graph_ontology(graph: Graph, who: Who) -> SafeJSONResponse:
    found = graph.ontology(who.tenant_id)
    return SafeJSONResponse(
        {"types": sorted(found.types), "single_valued": sorted(found.single_valued)}
    )


@router.post(
    "/graph/ontology", response_model=GraphOntologyOut, summary="Extend the tenant's ontology"
)
def graph_declare(body: DeclareBody, graph: Graph, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(graph.declare(who, types=body.types, predicates=body.predicates))


class MergeBody(Body):
    keep: str = Field(description="The entity id that stays (gets a new version).")
    merge: str = Field(description="The entity id folded into it.")
    scope: str = Field("agent", description="The one scope both entities are in.")
    reason: str | None = Field(None, description="Why (kept in the audit log).")


class RevertBody(Body):
    scope: str = Field("agent", description="The scope the merge was made in.")
    reason: str | None = Field(None, description="Why (kept in the audit log).")


@router.post(
    "/graph/merges",
    response_model=GraphMergeOut,
    status_code=201,
    summary="Merge one entity into another (versioned, reversible)",
)
def graph_merge(body: MergeBody, graph: Graph, who: Who) -> SafeJSONResponse:
    answer = GraphMerges(graph).merge(
        who, body.keep, body.merge, scope=body.scope, reason=body.reason
    )
    return SafeJSONResponse(answer, status_code=201)


@router.post(
    "/graph/merges/{merge_id}/revert", response_model=GraphRevertOut, summary="Undo an entity merge"
)
def graph_merge_revert(
    merge_id: str, graph: Graph, who: Who, body: RevertBody | None = None
) -> SafeJSONResponse:
    found = body or RevertBody()
    answer = GraphMerges(graph).revert(who, merge_id, scope=found.scope, reason=found.reason)
    return SafeJSONResponse(answer)


@router.get(
    "/graph/entities/{entity_id}/history",
    response_model=GraphEntityHistoryOut,
    summary="An entity's old versions",
)
def graph_entity_history(
    entity_id: str, graph: Graph, who: Who, scope: ScopeParam = "agent"
) -> SafeJSONResponse:
    return SafeJSONResponse(GraphMerges(graph).history(who, entity_id, scope=scope))
