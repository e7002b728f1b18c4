"""/v1/index: the compiled memory index of one scope (CONSOL-1, CONSOL-2, API-3).

``GET /v1/index`` is what an agent's context takes every turn: at most 100 lines, defanged and
framed as data, served from a TTL cache; when the store cannot be reached it answers 200 with
an empty index flagged ``degraded`` (a turn without memory, never a failed turn). The kept
versions are read through ``/v1/index/history``, ``/v1/index/versions/{n}`` and
``/v1/index/diff``; ``POST /v1/index/rebuild`` compiles the index now (the sweep does it on its
own after a write). ``POST /v1/harvest`` takes the spans a caller's context window is about to
lose and answers 202 at once (HARVEST-1)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from quipu.consolidation.index import IndexService
from quipu.core.records import Principal
from quipu.errors import InvalidInput
from quipu.harvest import Harvester
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["index"])
Who = Annotated[Principal, Depends(principal)]
ScopeParam = Annotated[str, Query(description="agent, user, agent_user, tenant or global.")]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class IndexViewOut(_Open):
    """The rendered index: ``lines``, ``text`` (framed as data), ``version``, counts,
    ``degraded`` and ``reason``."""


class IndexVersionOut(_Open):
    """One kept version: ``active`` and ``archive`` entries (date, tag, text, trust, link)."""


class IndexHistoryOut(_Open):
    """The kept versions, newest first: ``items`` (version, built_at, counts, expired)."""


class IndexDiffOut(_Open):
    """What changed between two versions: ``added``, ``archived``, ``removed``, ``changed``."""


async def indexes(request: Request) -> IndexService:
    """The runtime's index use cases (one TTL cache per process), or ones built on first use.
    Async: it does no I/O."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None and runtime.index is not None:
        found: IndexService = runtime.index
        return found
    built: IndexService | None = getattr(request.app.state, "index", None)
    if built is None:
        built = request.app.state.index = IndexService(request.app.state.service)
    return built


Index = Annotated[IndexService, Depends(indexes)]


@router.get("/index", response_model=IndexViewOut, summary="The scope's compiled memory index")
def index_get(index: Index, who: Who, scope: ScopeParam = "agent") -> SafeJSONResponse:
    return SafeJSONResponse(index.get(who, scope=scope).to_dict())


@router.get("/index/history", response_model=IndexHistoryOut, summary="Kept versions of the index")
def index_history(
    index: Index,
    who: Who,
    scope: ScopeParam = "agent",
    before: Annotated[int | None, Query(ge=1, le=2**31)] = None,
    limit: Annotated[int | None, Query(ge=1, le=100)] = None,
) -> SafeJSONResponse:
    items = index.history(who, scope=scope, before=before, limit=limit)
    return SafeJSONResponse({"items": items})


@router.get(
    "/index/versions/{version}",
    response_model=IndexVersionOut,
    summary="One kept version of the index",
)
def index_version(
    version: Annotated[int, Path(ge=1, le=2**31)],
    index: Index,
    who: Who,
    scope: ScopeParam = "agent",
) -> SafeJSONResponse:
    return SafeJSONResponse(index.version(who, version, scope=scope).to_dict())


@router.get("/index/diff", response_model=IndexDiffOut, summary="Diff two versions of the index")
def index_diff(
    index: Index,
    who: Who,
    from_version: Annotated[int | None, Query(ge=1, le=2**31)] = None,
    to_version: Annotated[int | None, Query(ge=1, le=2**31)] = None,
    scope: ScopeParam = "agent",
) -> SafeJSONResponse:
    return SafeJSONResponse(index.diff(who, from_version, to_version, scope=scope))


class RebuildBody(Body):
    scope: str | None = Field(None, description="The scope, as the query parameter names it.")


@router.post(
    "/index/rebuild", response_model=IndexVersionOut, summary="Compile the scope's index now"
)
def index_rebuild(
    index: Index,
    who: Who,
    body: RebuildBody | None = None,
    scope: Annotated[
        str | None, Query(description="agent (default), user, agent_user, tenant or global.")
    ] = None,
) -> SafeJSONResponse:
    """The scope comes from the query or the JSON body; both naming different scopes is 422
    ``scope_conflict`` (a body must never be ignored for the default scope)."""
    named = body.scope if body is not None else None
    if named is not None and scope is not None and named != scope:
        raise InvalidInput(
            "the query and the body name different scopes",
            code="scope_conflict",
            details={"query": scope, "body": named},
        )
    return SafeJSONResponse(index.rebuild(who, scope=named or scope or "agent").to_dict())


class HarvestBody(Body):
    spans: list[Any] = Field(
        description="The evicted spans, in order: strings (user turns) or {role, content} "
        "objects; 1 to 64 spans of at most 32,000 characters."
    )
    boundary: str = Field(
        "compaction", description="Where the context was cut: compaction, recap or stateful."
    )
    session_id: str | None = Field(None, description="The conversation the spans came from.")


class HarvestOut(_Open):
    """``batch_id``, ``accepted`` (false: dropped, see ``reason``: ``queue_full``), ``spans``,
    ``boundary``."""


async def harvester(request: Request) -> Harvester:
    """The runtime's harvest queue, or one built on first use (no runtime: the app's service
    with the deterministic extractor). Async: it does no I/O."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None and runtime.harvest is not None:
        found: Harvester = runtime.harvest
        return found
    built: Harvester | None = getattr(request.app.state, "harvest", None)
    if built is None:
        from quipu.extraction.deterministic import DeterministicExtractor

        built = Harvester(request.app.state.service, DeterministicExtractor())
        request.app.state.harvest = built
    return built


Harvest = Annotated[Harvester, Depends(harvester)]


@router.post(
    "/harvest",
    response_model=HarvestOut,
    status_code=202,
    summary="Hand over context spans about to be evicted (extracted later, whole batch)",
)
def harvest(
    body: HarvestBody, harvest: Harvest, who: Who, scope: ScopeParam = "agent"
) -> SafeJSONResponse:
    receipt = harvest.harvest(
        who, body.spans, boundary=body.boundary, scope=scope, session_id=body.session_id
    )
    return SafeJSONResponse(receipt.to_dict(), status_code=202)
