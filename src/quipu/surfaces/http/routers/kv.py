"""/v1/kv: the key/value plane (KV-1). Set, get, list by prefix, history, delete and erase of
per-scope entries; each call reads or writes exactly one scope (``scope`` query parameter,
default ``agent``). Keys are paths (``app/theme``): they sit in the URL as they are, ``/``
included. History and erase have their own prefixes so no key can shadow them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from quipu.core.records import Principal
from quipu.kv import KeyValueService
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.plane_responses import (
    KVEntryOut,
    KVEraseOut,
    KVHistoryOut,
    KVPageOut,
)
from quipu.surfaces.http.schemas import Body

#: Endpoints answer with :class:`SafeJSONResponse` themselves (documented as ``Json``), as the
#: memories router does.
router = APIRouter(prefix="/v1", tags=["kv"])
Json = dict[str, Any]
Who = Annotated[Principal, Depends(principal)]
ScopeParam = Annotated[str, Query(description="agent, user, agent_user, tenant or global.")]


async def key_values(request: Request) -> KeyValueService:
    """The key/value use cases over the app's memory service, built on first use. Async: it
    does no I/O."""
    found: KeyValueService | None = getattr(request.app.state, "kv", None)
    if found is None:
        found = request.app.state.kv = KeyValueService(request.app.state.service)
    return found


KV = Annotated[KeyValueService, Depends(key_values)]


class SetBody(Body):
    value: Any = Field(description="Any JSON value, bounded like metadata (secrets refused).")
    expected_version: int | None = Field(
        None,
        description="Compare-and-set: 0 = only if the key holds no value, n = only if its "
        "current version is n (409 version_conflict otherwise). Omit to write unconditionally.",
    )
    reason: str | None = None


class DeleteBody(Body):
    expected_version: int | None = Field(None, description="The version you read (optional).")
    reason: str | None = Field(None, description="Why; kept in history, never in a URL.")


class EraseBody(Body):
    reason: str = Field(description="Why (required; audited).")


@router.get("/kv", response_model=KVPageOut, summary="List keys of one scope by prefix")
def list_keys(
    kv: KV,
    who: Who,
    prefix: str = "",
    scope: ScopeParam = "agent",
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    as_of: datetime | None = None,
) -> SafeJSONResponse:
    page = kv.list(who, prefix=prefix, scope=scope, cursor=cursor, limit=limit, as_of=as_of)
    return SafeJSONResponse(page.to_dict())


@router.get("/kv/{key:path}", response_model=KVEntryOut, summary="Get a key's value (exact)")
def get_key(
    key: str, kv: KV, who: Who, scope: ScopeParam = "agent", as_of: datetime | None = None
) -> SafeJSONResponse:
    return SafeJSONResponse(kv.get(who, key, scope=scope, as_of=as_of).to_dict())


@router.put(
    "/kv/{key:path}",
    response_model=KVEntryOut,
    summary="Set a key's value (a new version)",
    responses={201: {"description": "The key's first value"}},
)
def set_key(
    key: str, body: SetBody, kv: KV, who: Who, scope: ScopeParam = "agent"
) -> SafeJSONResponse:
    entry = kv.set(
        who,
        key,
        body.value,
        scope=scope,
        expected_version=body.expected_version,
        reason=body.reason,
    )
    return SafeJSONResponse(entry.to_dict(), status_code=201 if entry.version == 1 else 200)


@router.delete("/kv/{key:path}", response_model=KVEntryOut, summary="Delete a key (logical)")
def delete_key(
    key: str, kv: KV, who: Who, scope: ScopeParam = "agent", body: DeleteBody | None = None
) -> SafeJSONResponse:
    given = body or DeleteBody()
    entry = kv.delete(
        who, key, scope=scope, expected_version=given.expected_version, reason=given.reason
    )
    return SafeJSONResponse(entry.to_dict())


@router.get("/kv-history/{key:path}", response_model=KVHistoryOut, summary="Every version of a key")
def key_history(key: str, kv: KV, who: Who, scope: ScopeParam = "agent") -> SafeJSONResponse:
    return SafeJSONResponse({"items": [e.to_dict() for e in kv.history(who, key, scope=scope)]})


@router.post(
    "/kv-erase/{key:path}", response_model=KVEraseOut, summary="Erase a key's values (compliance)"
)
def erase_key(
    key: str, body: EraseBody, kv: KV, who: Who, scope: ScopeParam = "agent"
) -> SafeJSONResponse:
    return SafeJSONResponse(kv.erase(who, key, scope=scope, reason=body.reason))
