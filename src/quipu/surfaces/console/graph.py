"""The console's entity graph screens (GRAPH-1, OPS-4): a subject's entities, one entity with
its facts (now, as of an instant, or with the closed ones and what closed them), each fact
linking to the memory it was read from. Reads go through
:class:`~quipu.graph.inspection.GraphInspection` (admins only, audited as ``graph.inspect``).

Entity ids, scopes, owners and entity types go in URLs; names never do: filtering by the start
of a name is a POST (like a search), and its next page too."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from quipu.core.records import Principal
from quipu.graph.inspection import EntityPage
from quipu.surfaces.console.web import Operator, console_of, one, operator, posted, render

router = APIRouter()


@router.get("/entities", include_in_schema=False)
def entities(
    request: Request,
    scope: str,
    owner: str = "",
    type: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    """A subject's entities, the most recently seen first, by type when asked."""
    who = operator(request)
    found = console_of(request).graph.entities(
        who.principal,
        scope=scope,
        owner=owner,
        types=[type] if type else None,
        cursor=cursor or None,
    )
    return _entities_page(request, who, found, type or "", "")


@router.post("/entities", include_in_schema=False)
async def filter_entities(request: Request) -> HTMLResponse:
    """The same list filtered by the start of a name too: the name stays out of the URL."""
    who, form = await posted(request)
    kind = one(form, "type") or ""
    prefix = one(form, "prefix") or ""
    graph = console_of(request).graph
    found = await run_in_threadpool(
        lambda: graph.entities(
            who.principal,
            scope=one(form, "scope") or "",
            owner=one(form, "owner") or "",
            types=[kind] if kind else None,
            prefix=prefix or None,
            cursor=one(form, "cursor"),
        )
    )
    return _entities_page(request, who, found, kind, prefix)


def _entities_page(
    request: Request, who: Operator, found: EntityPage, kind: str, prefix: str
) -> HTMLResponse:
    context = {
        "page": found,
        "scope": found.ref.scope.value,
        "owner": found.ref.owner,
        "types": _types(request, who.principal),
        "chosen_type": kind,
        "prefix": prefix,
    }
    return render(request, "entities.html", context, who=who)


def _types(request: Request, principal: Principal) -> list[str]:
    return sorted(console_of(request).graph.ontology(principal.tenant_id).types)


@router.get("/entities/{entity_id}", include_in_schema=False)
def entity(
    request: Request,
    entity_id: str,
    scope: str,
    owner: str = "",
    as_of: str | None = None,
    invalidated: str | None = None,
) -> HTMLResponse:
    """One entity and its facts: in force now or as of an instant, or every one recorded."""
    who = operator(request)
    every = invalidated in ("1", "on", "true")
    view = console_of(request).graph.entity(
        who.principal,
        entity_id,
        scope=scope,
        owner=owner,
        as_of=as_of or None,
        include_invalidated=every,
    )
    at = view.as_of
    context: dict[str, Any] = {
        "view": view,
        "scope": view.ref.scope.value,
        "owner": view.ref.owner,
        "as_of_value": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] if at else "",
    }
    return render(request, "entity.html", context, who=who)
