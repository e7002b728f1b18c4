"""/v1/graph/placement: the tenant's placement policy (GRAPH-2). Any key reads it (``GET``,
``version`` for an older one); an admin key declares a new version (``PUT``): the entity types
whose facts live in the tenant scope, the names known to be of each, and the isolated callers.
Each declaration is audited as ``graph.placement.declare``; each write it then places is
audited as ``graph.placement`` with the check that decided."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from quipu.core.records import Principal
from quipu.graph.placement import Placement
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.routers.graph import graph_service
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["graph"])
Who = Annotated[Principal, Depends(principal)]


async def placement_service(request: Request) -> Placement:
    """The memory service's own placement (the one it writes through), or one built on the
    app's graph service when write-time extraction is off. Async: it does no I/O."""
    own = request.app.state.service.placement
    if isinstance(own, Placement):
        return own
    found = getattr(request.app.state, "placement", None)
    if found is None:
        found = request.app.state.placement = Placement(await graph_service(request))
    return found


Placing = Annotated[Placement, Depends(placement_service)]


class PlacementBody(Body):
    types: list[Any] | None = Field(
        None,
        description="Each {type, scope: tenant|writer, names}: a type whose facts live in the "
        "tenant scope, and the names known to be of it.",
    )
    isolated: list[Any] | None = Field(
        None, description="User, agent or key ids whose writes never leave their own scope."
    )
    expected_version: int | None = Field(
        None, description="The version this declaration replaces (409 when it moved on)."
    )
    reason: str | None = Field(None, description="Why (kept in the audit log).")


class PlacementOut(BaseModel):
    """One version of the placement policy."""

    model_config = ConfigDict(extra="allow")
    version: int
    types: list[dict[str, Any]]
    isolated: list[str]


@router.get(
    "/graph/placement", response_model=PlacementOut, summary="The tenant's placement policy"
)
def placement_read(placing: Placing, who: Who, version: int | None = None) -> SafeJSONResponse:
    return SafeJSONResponse(placing.policy(who, version))


@router.put("/graph/placement", response_model=PlacementOut, summary="Declare the placement policy")
def placement_declare(body: PlacementBody, placing: Placing, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(
        placing.declare(
            who,
            types=body.types,
            isolated=body.isolated,
            expected_version=body.expected_version,
            reason=body.reason,
        )
    )
