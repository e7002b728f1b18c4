"""The entity graph tools (issue 26, GRAPH-1, API-3): graph_recall and graph_facts, and the
versioned, reversible entity merges graph_merge, graph_merge_revert and graph_entity_history.
Each works in exactly one scope; no tool takes a tenant, owner or subject id of another
principal (SCOPE-2).
Names and values come from stored memories, so the text for the model shows them inside a
data block (SAFE-2): data, never instructions."""

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.records import Principal
from quipu.graph.merges import GraphMerges
from quipu.graph.service import GraphService
from quipu.safety import render_data_block

GRAPH_TOOL_NAMES = (
    "graph_recall",
    "graph_facts",
    "graph_merge",
    "graph_merge_revert",
    "graph_entity_history",
)

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
GRAPH_MERGE = """\
Merge two entities of ONE scope (`scope`, default `agent`) that are the same thing ("Kasia" is
"Katherine"): `merge` is folded into `keep` (both entity ids, as graph_facts shows them). `keep`
gets a new version with the other's name among its aliases, and every fact and mention of
`merge` now names `keep`. Reversible with graph_merge_revert (the answer's `merge_id`); the old
version stays in graph_entity_history. Audited; `reason` is kept."""
GRAPH_MERGE_REVERT = """\
Undo an entity merge of ONE scope (`scope`, default `agent`) by its `merge_id`: the merged
entity returns with its facts and mentions, and the kept one loses the aliases the merge gave
it (a new version). Refused (merge_conflict) while a later merge into the kept entity stands:
revert that one first. Audited; `reason` is kept."""
GRAPH_ENTITY_HISTORY = """\
The old versions of one entity (an entity id) in ONE scope (`scope`, default `agent`), oldest
first: what each merge or revert replaced (its name, type and aliases then)."""
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


def merge_tools(server: MCPServer, graph: GraphService, call: Call) -> None:
    """Register graph_merge, graph_merge_revert and graph_entity_history on ``server``."""
    merges = GraphMerges(graph)
    writer = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    why = Field(description="Why (kept in the audit log).")

    @server.tool(
        name="graph_merge", title="Merge two entities", description=GRAPH_MERGE, annotations=writer
    )
    def graph_merge(
        keep: Annotated[str, Field(description="The entity id that stays (gets a new version).")],
        merge: Annotated[str, Field(description="The entity id folded into it.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        reason: Annotated[str | None, why] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx, lambda who: merges.merge(who, keep, merge, scope=scope, reason=reason), _merged
        )

    @server.tool(
        name="graph_merge_revert",
        title="Undo an entity merge",
        description=GRAPH_MERGE_REVERT,
        annotations=writer,
    )
    def graph_merge_revert(
        merge_id: Annotated[str, Field(description="The merge_id graph_merge answered.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        reason: Annotated[str | None, why] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx, lambda who: merges.revert(who, merge_id, scope=scope, reason=reason), _reverted
        )

    @server.tool(
        name="graph_entity_history",
        title="An entity's old versions",
        description=GRAPH_ENTITY_HISTORY,
        annotations=reader,
    )
    def graph_entity_history(
        entity_id: Annotated[str, Field(description="The entity id.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(ctx, lambda who: merges.history(who, entity_id, scope=scope), _history)


def _merged(data: Mapping[str, Any]) -> str:
    entity = data.get("entity", {})
    line = f"{entity.get('name')} ({entity.get('entity_id')}) v{data.get('version')}"
    return f"merged, merge_id {data.get('merge_id')}\n{render_data_block([line], 'graph')}"


def _reverted(data: Mapping[str, Any]) -> str:
    back = data.get("restored", {})
    line = f"{back.get('name')} ({back.get('entity_id')})"
    return f"reverted merge {data.get('merge_id')}\n{render_data_block([line], 'graph')}"


def _history(data: Mapping[str, Any]) -> str:
    lines = [
        f"v{v.get('version')} {v.get('name')} aliases={v.get('aliases')}"
        f" ended_by={v.get('ended_by')}"
        for v in data.get("versions", [])
    ]
    return f"{len(lines)} old versions\n{render_data_block(lines, 'graph')}"
