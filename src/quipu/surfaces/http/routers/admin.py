"""Run tokens for service keys (the audit log and oversight: the governance router)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from quipu.auth.access import Access
from quipu.core.records import Principal
from quipu.errors import InvalidInput, NotFound
from quipu.memories import MemoryService
from quipu.surfaces.http.deps import principal, service
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["access"])
Svc = Annotated[MemoryService, Depends(service)]
Who = Annotated[Principal, Depends(principal)]
Json = dict[str, Any]


class TokenBody(Body):
    agent_id: str
    user_id: str | None = None
    ttl_seconds: int = 3600


def _access(request: Request) -> Access:
    access: Access | None = request.app.state.access
    if access is None:
        raise NotFound("run tokens need a server started with authentication (auth = true)")
    return access


@router.post(
    "/tokens", status_code=201, response_model=Json, summary="Mint a run token (service keys)"
)
def mint_token(body: TokenBody, who: Who, svc: Svc, request: Request) -> SafeJSONResponse:
    svc.guard.admit_write(who)  # minting spends from the service key's bucket (defect 12)
    credential, secret = _access(request).mint_run_token(
        who, body.agent_id, body.user_id, _ttl(body.ttl_seconds)
    )
    return SafeJSONResponse({"token": secret, "credential": credential.to_dict()}, status_code=201)


def _ttl(seconds: int) -> timedelta:
    """A timedelta holds about 2.7 million years; a larger count is refused like any other
    out-of-range lifetime, not left to overflow into a 500 (issue 20 defect 9)."""
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidInput(
            "ttl_seconds is out of range", code="invalid_ttl", details={"field": "ttl_seconds"}
        ) from None
