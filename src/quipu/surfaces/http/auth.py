"""Resolving the caller's principal from the request: local mode or bearer credentials."""

from __future__ import annotations

from fastapi import Request

from quipu.auth.access import Access
from quipu.core.records import Principal
from quipu.errors import Unauthorized
from quipu.surfaces.http.deps import PrincipalResolver

IMPERSONATION_HEADER = "X-Quipu-Tenant"


def local_resolver(principal: Principal) -> PrincipalResolver:
    """Embedded mode: every request acts as the trusted local principal."""

    def resolve(_request: Request) -> Principal:
        return principal

    return PrincipalResolver(resolve, blocking=False)


def bearer_resolver(access: Access) -> PrincipalResolver:
    """Multi-tenant mode: ``Authorization: Bearer <key or run token>`` on every request."""

    def resolve(request: Request) -> Principal:
        return authenticate_header(
            access,
            request.headers.get("authorization"),
            request.headers.get(IMPERSONATION_HEADER),
            "http",
        )

    return PrincipalResolver(resolve, blocking=True)


def authenticate_header(
    access: Access, header: str | None, impersonate: str | None, surface: str
) -> Principal:
    if not header or not header.lower().startswith("bearer "):
        raise Unauthorized("send Authorization: Bearer <api key or run token>")
    return access.authenticate(header[7:].strip(), impersonate=impersonate, surface=surface)
