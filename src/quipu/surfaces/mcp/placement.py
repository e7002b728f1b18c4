"""The placement policy tool (issue 26, GRAPH-2): ``graph_placement`` reads the tenant's
policy, and with ``types`` or ``isolated`` an admin key declares a new version. The policy is
operator configuration: which entity types' facts live in the tenant scope (with the names
known to be of each type) and which callers are isolated. No argument names a tenant or owner:
the tenant is the key's (SCOPE-2)."""

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.records import Principal
from quipu.graph.placement import Placement

PLACEMENT_TOOL_NAMES = ("graph_placement",)

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]

GRAPH_PLACEMENT = """\
Read your tenant's placement policy: which entity types' facts are shared in the tenant scope
(e.g. services, policies) rather than kept in the writer's own scope, the names known to be of
each type, and the isolated callers. A memory about such a thing moves to the tenant scope only
when every check passes (declared type, consistent typing, not about the writer, caller not
isolated, caller holds both tenant grants); otherwise it stays private. With `types` or
`isolated`, an admin key declares a new version of the policy instead (audited)."""


def _text(data: Any) -> str:
    types = ", ".join(f"{t.get('type')}→{t.get('scope')}" for t in data.get("types", []))
    return f"placement policy v{data.get('version')}: {types or 'nothing placed'}"


def placement_tools(server: MCPServer, placement: Placement, call: Call) -> None:
    """Register ``graph_placement`` on ``server``."""
    annotations = ToolAnnotations(read_only_hint=False, destructive_hint=False)

    @server.tool(
        name="graph_placement",
        title="Placement policy",
        description=GRAPH_PLACEMENT,
        annotations=annotations,
    )
    def graph_placement(
        ctx: Context,
        types: Annotated[
            list[Any] | None,
            Field(description="Admin: each {type, scope: tenant|writer, names} to declare."),
        ] = None,
        isolated: Annotated[
            list[Any] | None, Field(description="Admin: ids whose writes never leave their scope.")
        ] = None,
        expected_version: Annotated[
            int | None, Field(description="Admin: the version this declaration replaces.")
        ] = None,
        reason: Annotated[str | None, Field(description="Admin: why (audited).")] = None,
        version: Annotated[int | None, Field(description="Read this older version.")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        def act(who: Principal) -> dict[str, Any]:
            if types is None and isolated is None:
                return placement.policy(who, version)
            return placement.declare(
                who,
                types=types,
                isolated=isolated,
                expected_version=expected_version,
                reason=reason,
            )

        return call(ctx, act, _text)
