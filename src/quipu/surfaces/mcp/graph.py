"""The entity graph tools (issue 26, GRAPH-1, API-3): graph_recall and graph_facts. Each reads
exactly one scope; no tool takes a tenant, owner or subject id of another principal (SCOPE-2).
Names and values come from stored memories, so the text for the model shows them inside a
data block (SAFE-2): data, never instructions."""

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.records import Principal
from quipu.graph.service import GraphService
from quipu.safety import render_data_block

GRAPH_TOOL_NAMES = ("graph_recall", "graph_facts")

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]
ScopeName = Literal["agent", "user", "agent_user", "tenant"]

GRAPH_RECALL = """\
Find the people, places, organisations and things your question names in ONE scope's entity
graph (`scope`, default `agent`), and the facts around them up to `hops` steps away (1 or 2):
who lives where, works where, is related to whom, visited what. Each fact names the memories
it came from (`memory_ids`; read them with memory_get). Use it for questions that join facts
from different conversations ("where does Anna's brother work?"). `as_of` (ISO-8601) answers
as things stood then. Reads exactly one scope."""
GRAPH_FACTS = """\
List what is known about one subject (a name, an alias or an entity id) in ONE scope
(`scope`, default `agent`): its current facts, or those in force `as_of` a time, or with
`include_invalidated` every fact ever recorded, including ones a later fact replaced (a move,
a new job). Each fact names its source memories. Reads exactly one scope."""
SCOPE = (
    "agent (default: private to you), user (about the end user, shared across agents), "
    "agent_user (you about this user), tenant (the whole organisation). One call reads "
    "exactly one scope."
)


def _line(fact: Mapping[str, Any]) -> str:
    target = fact.get("object") if fact.get("object") is not None else fact.get("value")
    state = "" if fact.get("current") else f" (until {fact.get('invalid_at')})"
    sources = ",".join(fact.get("memory_ids", []))
    return f"{fact.get('subject')} {fact.get('predicate')} {target}{state} [from {sources}]"


def answer_text(data: Mapping[str, Any]) -> str:
    entities = data.get("entities", [])
    facts = data.get("facts", [])
    names = ", ".join(f"{e.get('name')} ({e.get('type')})" for e in entities)
    lines = [f"entities: {names}"] + [_line(f) for f in facts]
    return f"{len(entities)} entities, {len(facts)} facts\n{render_data_block(lines, 'graph')}"


def graph_tools(server: MCPServer, graph: GraphService, call: Call) -> None:
    """Register the graph tools on ``server`` (see the module docstring)."""
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(
        name="graph_recall", title="Graph recall", description=GRAPH_RECALL, annotations=reader
    )
    def graph_recall(
        query: Annotated[str, Field(description="A question or the names to look up.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        hops: Annotated[int, Field(description="Steps from the named entities (0-2).")] = 1,
        limit: Annotated[int | None, Field(description="Most facts to return (1-200).")] = None,
        as_of: Annotated[str | None, Field(description="Answer as of this time.")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: graph.recall(
                who, query, scope=scope, hops=hops, limit=limit, as_of=as_of
            ).to_dict(),
            answer_text,
        )

    @server.tool(
        name="graph_facts",
        title="Facts about a subject",
        description=GRAPH_FACTS,
        annotations=reader,
    )
    def graph_facts(
        subject: Annotated[str, Field(description="A name, alias or entity id.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        as_of: Annotated[str | None, Field(description="Facts in force at this time.")] = None,
        include_invalidated: Annotated[
            bool, Field(description="Also facts a later fact replaced.")
        ] = False,
        limit: Annotated[int | None, Field(description="Most facts to return (1-200).")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: graph.facts(
                who,
                subject,
                scope=scope,
                as_of=as_of,
                include_invalidated=include_invalidated,
                limit=limit,
            ).to_dict(),
            answer_text,
        )
