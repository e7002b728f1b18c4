"""The bulk write tool (issue 23, ingest): ``memory_remember_many`` stores many memories of one
scope in one call, each refused alone (a secret, a bad field) while the others are written."""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.records import Principal
from quipu.memories import MemoryService
from quipu.memory_batch import MAX_ITEMS, outcome_dict, remember_many

BATCH_TOOL_NAMES = ("memory_remember_many",)

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]

REMEMBER_MANY = f"""\
Remember many memories of one scope in one call (at most {MAX_ITEMS}): each item a text, or an
object with `text` and any field of memory_remember. One result per item, in order: its id and
whether it was created (an exact duplicate is not), or the error that refused that item alone —
a secret in any field, a bad field, the rate limit. The other items are still written."""


def _text(data: Any) -> str:
    results = data.get("results", [])
    refused = sum(1 for r in results if "error" in r)
    return f"{len(results) - refused} remembered, {refused} refused"


def batch_tools(server: MCPServer, service: MemoryService, call: Call) -> None:
    """Register ``memory_remember_many`` on ``server``."""

    @server.tool(
        name="memory_remember_many",
        title="Remember many",
        description=REMEMBER_MANY,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    def memory_remember_many(
        items: Annotated[list[Any], Field(description="The memories: texts or objects.")],
        ctx: Context,
        scope: Annotated[
            Literal["agent", "user", "agent_user", "tenant"],
            Field(description="Where every item is written."),
        ] = "agent",
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        def act(who: Principal) -> dict[str, Any]:
            outcomes = remember_many(service, who, items, scope=scope)
            return {"results": [outcome_dict(n, o, whole=False) for n, o in enumerate(outcomes)]}

        return call(ctx, act, _text)
