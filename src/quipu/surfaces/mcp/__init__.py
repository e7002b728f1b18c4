"""The MCP surface (API-3): the memory tools over stdio (``quipu mcp``) and streamable HTTP
(``/mcp`` in the HTTP app, authenticated by the same bearer credentials)."""

from quipu.surfaces.mcp.http import (
    LOOPBACK_HOSTS,
    Authenticate,
    mount_mcp,
    principal_from_request,
)
from quipu.surfaces.mcp.server import (
    TOOL_NAMES,
    PrincipalForRequest,
    create_mcp_server,
    fixed_principal,
)

__all__ = [
    "LOOPBACK_HOSTS",
    "TOOL_NAMES",
    "Authenticate",
    "PrincipalForRequest",
    "create_mcp_server",
    "fixed_principal",
    "mount_mcp",
    "principal_from_request",
]
