"""``memory_search`` (issue 28, RECALL-8): one search across every plane of one scope, each row
labelled with its plane. Rows reach the model inside a data block (SAFE-2)."""

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.records import Principal
from quipu.safety import render_data_block
from quipu.search import SearchService

SEARCH_TOOL_NAMES = ("memory_search",)

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]
ScopeName = Literal["agent", "user", "agent_user", "tenant"]
PlaneName = Literal["facts", "notes", "documents", "kv", "graph"]

SEARCH = """\
"Where did I record this?": search every plane of ONE scope at once (`scope`, default `agent`)
and get rows labelled with their plane: `facts` and `notes` (memories), `documents` (pointers
into documents: id, offsets, snippet), `kv` (the entry whose key is exactly your query). Reads
exactly one scope; call once per scope. Use memory_recall to answer from facts and notes, and
this when you do not know where something was stored. `meta.unserved_planes` names a plane that
could not be searched (and why)."""
SCOPE = (
    "agent (default: private to you), user (about the end user, shared across agents), "
    "agent_user (you about this user), tenant (the whole organisation). One call reads one scope."
)


def _line(row: Mapping[str, Any]) -> str:
    plane = row.get("plane")
    if plane == "documents":
        d = row.get("document", {})
        body = f"{d.get('title')} [{d.get('document_id')} {d.get('start')}-{d.get('end')}]: " + str(
            d.get("snippet")
        )
    elif plane == "kv":
        e = row.get("entry", {})
        body = f"{e.get('key')} = {json.dumps(e.get('value'), ensure_ascii=False)}"
    elif plane == "graph":
        f = row.get("fact", {})
        target = f.get("object") if f.get("object") is not None else f.get("value")
        body = f"{f.get('subject')} {f.get('predicate')} {target} [from {f.get('memory_ids')}]"
    else:
        m = row.get("memory", {})
        body = f"[{m.get('id')} v{m.get('version')} {m.get('kind')}] {m.get('text')}"
    return f"({plane} score={row.get('score')}) {body}"


def search_text(data: Mapping[str, Any]) -> str:
    rows = data.get("results", [])
    meta = json.dumps(data.get("meta", {}), ensure_ascii=False, separators=(",", ":"))
    block = render_data_block([_line(r) for r in rows], "memory")
    return f"{len(rows)} rows; meta: {meta}\n{block}"


def search_tools(server: MCPServer, search: SearchService, call: Call) -> None:
    """Register ``memory_search`` on ``server``."""
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(
        name="memory_search", title="Search every plane", description=SEARCH, annotations=reader
    )
    def memory_search(
        query: Annotated[str, Field(description="What you are looking for.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        k: Annotated[int | None, Field(description="How many rows in all.", ge=1)] = None,
        planes: Annotated[
            list[PlaneName] | None, Field(description="Only these planes (default: all).")
        ] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx, lambda who: search.search(who, query, scope=scope, k=k, planes=planes), search_text
        )
