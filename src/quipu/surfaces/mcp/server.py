"""The MCP server (API-3): the memory verbs as MCP tools over the one synchronous service.

Tools are plain ``def`` functions: the SDK runs them on a worker thread, so the service never
blocks the event loop. Who is calling comes only from ``principal_for_request`` (the trusted
local principal over stdio, the request's own credential over HTTP); no tool has a tenant,
owner or subject argument (SCOPE-2). A :class:`QuipuError` becomes a tool error whose text
starts with the stable code and whose structured content is the HTTP error envelope.

No ``from __future__ import annotations`` here: the SDK reads each tool's signature, and the
argument help (which names configured limits) is built per server, so the annotations must be
evaluated where the tools are defined.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, Literal, NotRequired, get_args

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

from quipu.consolidation.index import IndexService
from quipu.core.records import MemoryVersion, Principal
from quipu.core.views import MAX_FIELDS, ExtraField, check_fields, recall_entries, recall_view
from quipu.documents import DocumentService
from quipu.errors import InvalidInput, LimitExceeded, QuipuError
from quipu.fanout import recall_across
from quipu.governance import GovernanceService
from quipu.graph.placement import Placement
from quipu.graph.service import GraphService
from quipu.harvest import Harvester
from quipu.jobs.visibility import job_handle
from quipu.knowledge import KnowledgeService
from quipu.kv import KeyValueService
from quipu.memories import MemoryService
from quipu.recall_context import MergedRecall
from quipu.search import SearchService
from quipu.sessions import SessionService
from quipu.surfaces import metrics
from quipu.surfaces.forgetting import forget_once
from quipu.surfaces.http.encoding import clean_text, json_safe
from quipu.surfaces.http.errors import summarize
from quipu.surfaces.mcp import descriptions as d
from quipu.surfaces.mcp import render
from quipu.surfaces.mcp.documents import document_tools
from quipu.surfaces.mcp.governance import governance_tools
from quipu.surfaces.mcp.graph import graph_tools, merge_tools
from quipu.surfaces.mcp.index import index_tools
from quipu.surfaces.mcp.knowledge import knowledge_tools
from quipu.surfaces.mcp.kv import kv_tools
from quipu.surfaces.mcp.memory_batch import batch_tools
from quipu.surfaces.mcp.placement import placement_tools
from quipu.surfaces.mcp.search import search_tools
from quipu.surfaces.mcp.stdio import serve_stdio
from quipu.version import __version__

log = logging.getLogger("quipu.mcp")

#: Resolves the principal of one tool call from its MCP request context.
PrincipalForRequest = Callable[[Context], Principal]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

#: The scopes an agent reads and writes; ``global`` is left to the superadmin HTTP API.
ScopeName = Literal["agent", "user", "agent_user", "tenant"]
KindName = Literal["fact", "preference", "decision", "procedure", "episode", "experience", "note"]

#: Page size of memory_list when the agent does not say (an agent's context is small).
DEFAULT_LIST_LIMIT = 20

TOOL_NAMES = (
    "memory_remember",
    "memory_recall",
    "memory_list",
    "memory_get",
    "memory_history",
    "memory_revise",
    "memory_supersede",
    "memory_forget",
    "memory_remember_many",  # issue 23: the bulk write (surfaces/mcp/memory_batch.py)
)


class RememberOutput(TypedDict):
    memory: dict[str, Any]
    created: bool
    notice: NotRequired[dict[str, str]]


class RecallOutput(TypedDict):
    results: list[dict[str, Any]]
    meta: dict[str, Any]


class ListOutput(TypedDict):
    items: list[dict[str, Any]]
    next_cursor: str | None


class HistoryOutput(TypedDict):
    versions: list[dict[str, Any]]


class QuipuMCPServer(MCPServer):
    """The SDK's server, with every failed call answered in the error envelope and over stdio
    :func:`serve_stdio` as the transport (it answers every line)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        """Arguments that fail the tool's input schema: ``invalid_request`` with the fields,
        as over HTTP. A crash: ``internal_error``, logged as a bounded summary (the SDK would
        log the full traceback and answer an uncoded text)."""
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            log.error("tool %s failed: %s", name, summarize(exc.__cause__ or exc))
            return _failure(QuipuError("the server failed; the error was logged"))
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                return _failure(InvalidInput(str(exc), code="invalid_request"))
            problems = [
                {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]}
                for e in exc.__cause__.errors(include_input=False, include_url=False)
            ]
            return _failure(
                InvalidInput(
                    f"the arguments do not match the input schema of {name}",
                    code="invalid_request",
                    details={"problems": problems},
                )
            )

    async def run_stdio_async(self) -> None:
        await serve_stdio(self)

    async def list_tools(self) -> list[MCPTool]:
        """The SDK's tool list without the ``title`` pydantic puts on every schema and
        property (the names say it): ~15 % of what a client loads when it connects."""
        tools = await super().list_tools()
        return [
            tool.model_copy(
                update={
                    "input_schema": _untitled(tool.input_schema),
                    "output_schema": _untitled(tool.output_schema),
                }
            )
            for tool in tools
        ]


def fixed_principal(principal: Principal) -> PrincipalForRequest:
    """Every call acts as ``principal``: the trusted local principal of ``quipu mcp``."""

    def resolve(_ctx: Context) -> Principal:
        return principal

    return resolve


def create_mcp_server(
    service: MemoryService,
    principal_for_request: PrincipalForRequest,
    *,
    name: str = "quipu",
    log_level: LogLevel = "WARNING",
    sessions: SessionService | None = None,
    governance: GovernanceService | None = None,
    index: IndexService | None = None,
    harvest: Harvester | None = None,
) -> MCPServer:
    """An MCP server exposing the memory tools; run it over stdio or mount it over HTTP.
    ``index`` (the runtime's, with its cache) serves ``index_get`` and its resource."""
    server: MCPServer = QuipuMCPServer(
        name,
        title="Quipu memory",
        instructions=d.INSTRUCTIONS,
        version=__version__,
        log_level=log_level,
    )

    def call(
        ctx: Context,
        action: Callable[[Principal], Any],
        text: Callable[[Any], str] | None = None,
    ) -> CallToolResult:
        """Run ``action``; ``text`` renders a result holding memories for the model (SAFE-2)."""
        try:
            return _success(action(principal_for_request(ctx)), text)
        except QuipuError as exc:
            return _failure(exc)

    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    lim = service.limits
    default_list = min(DEFAULT_LIST_LIMIT, lim.max_page)
    bound = {**asdict(lim), "default_list": default_list}
    text_help, metadata_help = d.TEXT.format(**bound), d.METADATA.format(**bound)
    query_help, k_help, limit_help = (t.format(**bound) for t in (d.QUERY, d.K, d.LIMIT))

    @server.tool(
        name="memory_remember",
        title="Remember",
        description=d.REMEMBER,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    def memory_remember(
        text: Annotated[str, Field(description=text_help)],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=d.SCOPE)] = "agent",
        kind: Annotated[KindName, Field(description=d.KIND)] = "fact",
        tags: Annotated[
            list[str] | None, Field(description=d.TAGS, max_length=lim.max_tags)
        ] = None,
        aliases: Annotated[
            list[str] | None, Field(description=d.ALIASES, max_length=lim.max_aliases)
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description=metadata_help)] = None,
        project: Annotated[str | None, Field(description=d.PROJECT)] = None,
        confidence: Annotated[float, Field(description=d.CONFIDENCE, ge=0, le=1)] = 1.0,
        observed_at: Annotated[str | None, Field(description=d.OBSERVED_AT)] = None,
        valid_at: Annotated[str | None, Field(description=d.VALID_AT)] = None,
        invalid_at: Annotated[str | None, Field(description=d.INVALID_AT)] = None,
        session_id: Annotated[str | None, Field(description=d.SESSION_ID)] = None,
        run_id: Annotated[str | None, Field(description=d.RUN_ID)] = None,
        quote: Annotated[str | None, Field(description=d.QUOTE)] = None,
    ) -> Annotated[CallToolResult, RememberOutput]:
        def act(who: Principal) -> RememberOutput:
            result = service.remember(
                who,
                text,
                scope=scope,
                kind=kind,
                tags=tags,
                aliases=aliases,
                metadata=metadata,
                project=project,
                confidence=confidence,
                observed_at=observed_at,
                valid_at=valid_at,
                invalid_at=invalid_at,
                session_id=session_id,
                run_id=run_id,
                quote=quote,
            )
            answer: RememberOutput = {
                "memory": result.memory.to_dict(),
                "created": result.created,
            }
            if (notice := result.notice) is not None:
                answer["notice"] = notice
            return answer

        return call(ctx, act)

    @server.tool(name="memory_recall", title="Recall", description=d.RECALL, annotations=reader)
    def memory_recall(
        query: Annotated[str, Field(description=query_help)],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=d.READ_SCOPE)] = "agent",
        scopes: Annotated[
            list[ScopeName] | None,
            Field(description=d.SCOPES, min_length=1, max_length=len(get_args(ScopeName))),
        ] = None,
        k: Annotated[int | None, Field(description=k_help, ge=1, le=lim.max_k)] = None,
        kinds: Annotated[list[KindName] | None, Field(description=d.FILTER_KINDS)] = None,
        tags: Annotated[
            list[str] | None, Field(description=d.FILTER_TAGS, max_length=lim.max_tags)
        ] = None,
        project: Annotated[str | None, Field(description=d.PROJECT)] = None,
        as_of: Annotated[str | None, Field(description=d.AS_OF)] = None,
        observed_after: Annotated[str | None, Field(description=d.OBSERVED_AFTER)] = None,
        observed_before: Annotated[str | None, Field(description=d.OBSERVED_BEFORE)] = None,
        min_confidence: Annotated[
            float | None, Field(description=d.MIN_CONFIDENCE, ge=0, le=1)
        ] = None,
        fields: Annotated[
            list[ExtraField] | None, Field(description=d.FIELDS, max_length=MAX_FIELDS)
        ] = None,
        verbose: Annotated[bool, Field(description=d.VERBOSE)] = False,
    ) -> CallToolResult:
        """By default text only (no structured copy): one line per hit in a data block
        (SAFE-2); with ``verbose`` the HTTP API's recall as structured content and the hits
        as the data block (issue 27: the same answer twice cost twice)."""
        filters: dict[str, Any] = {
            "kinds": kinds,
            "tags": tags,
            "project": project,
            "as_of": as_of,
            "observed_after": observed_after,
            "observed_before": observed_before,
            "min_confidence": min_confidence,
        }

        def act(who: Principal) -> CallToolResult:
            if scopes is not None:
                result = recall_across(service, who, query, scopes, k=k, **filters)
            else:
                result = service.recall(who, query, scope=scope, k=k, **filters)
            metrics.observe_recall(result.meta)
            extra = check_fields(fields)
            if verbose:
                return _success(recall_view(result, verbose=True, fields=extra), render.recall_text)
            head, entries = recall_entries(result, extra)
            text = _clean(render.block(head, entries))
            return CallToolResult(content=[TextContent(type="text", text=text)])

        try:
            return act(principal_for_request(ctx))
        except QuipuError as exc:
            return _failure(exc)

    @server.tool(name="memory_list", title="List memories", description=d.LIST, annotations=reader)
    def memory_list(
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=d.READ_SCOPE)] = "agent",
        limit: Annotated[int | None, Field(description=limit_help, ge=1, le=lim.max_page)] = None,
        cursor: Annotated[str | None, Field(description=d.CURSOR)] = None,
        kinds: Annotated[list[KindName] | None, Field(description=d.FILTER_KINDS)] = None,
        tags: Annotated[
            list[str] | None, Field(description=d.FILTER_TAGS, max_length=lim.max_tags)
        ] = None,
        project: Annotated[str | None, Field(description=d.PROJECT)] = None,
        as_of: Annotated[str | None, Field(description=d.AS_OF)] = None,
    ) -> Annotated[CallToolResult, ListOutput]:
        def act(who: Principal) -> ListOutput:
            page = service.list(
                who,
                scope=scope,
                limit=default_list if limit is None else limit,
                cursor=cursor,
                kinds=kinds,
                tags=tags,
                project=project,
                as_of=as_of,
            )
            return {"items": _dicts(page.items), "next_cursor": page.next_cursor}

        return call(ctx, act, render.items_text)

    @server.tool(name="memory_get", title="Get a memory", description=d.GET, annotations=reader)
    def memory_get(
        memory_id: Annotated[str, Field(description=d.MEMORY_ID)], ctx: Context
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(ctx, lambda who: service.get(who, memory_id).to_dict(), render.memory_text)

    @server.tool(
        name="memory_history", title="Memory history", description=d.HISTORY, annotations=reader
    )
    def memory_history(
        memory_id: Annotated[str, Field(description=d.MEMORY_ID)], ctx: Context
    ) -> Annotated[CallToolResult, HistoryOutput]:
        return call(
            ctx,
            lambda who: {"versions": _dicts(service.history(who, memory_id))},
            lambda data: render.items_text(data, "versions"),
        )

    @server.tool(
        name="memory_revise",
        title="Revise a memory",
        description=d.REVISE,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def memory_revise(
        memory_id: Annotated[str, Field(description=d.MEMORY_ID)],
        text: Annotated[str, Field(description=d.REVISE_TEXT)],
        expected_version: Annotated[int, Field(description=d.EXPECTED_VERSION, ge=1)],
        ctx: Context,
        reason: Annotated[str | None, Field(description=d.REASON)] = None,
        valid_at: Annotated[str | None, Field(description=d.VALID_AT)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: service.revise(
                who,
                memory_id,
                text,
                expected_version=expected_version,
                reason=reason,
                valid_at=valid_at,
            ).to_dict(),
        )

    @server.tool(
        name="memory_supersede",
        title="Supersede a memory",
        description=d.SUPERSEDE,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def memory_supersede(
        old_id: Annotated[str, Field(description=d.OLD_ID)],
        new_id: Annotated[str, Field(description=d.NEW_ID)],
        expected_version: Annotated[int, Field(description=d.EXPECTED_VERSION, ge=1)],
        ctx: Context,
        reason: Annotated[str | None, Field(description=d.REASON)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: service.supersede(
                who, old_id, new_id, reason=reason, expected_version=expected_version
            ).to_dict(),
        )

    @server.tool(
        name="memory_forget",
        title="Forget a memory",
        description=d.FORGET,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def memory_forget(
        memory_id: Annotated[str, Field(description=d.MEMORY_ID)],
        ctx: Context,
        reason: Annotated[str | None, Field(description=d.REASON)] = None,
        expected_version: Annotated[
            int | None, Field(description=d.EXPECTED_VERSION_OPTIONAL, ge=1)
        ] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: forget_once(
                lambda: service.forget(
                    who, memory_id, reason=reason, expected_version=expected_version
                ),
                lambda: service.history(who, memory_id),
            ).to_dict(),
        )

    if sessions is not None:
        _session_tools(server, sessions, call)
    batch_tools(server, service, call)  # issue 23: the bulk write
    if governance is not None:  # a runtime's server: every plane's tools
        governance_tools(server, governance, call)
        kv, documents = KeyValueService(service), DocumentService(service)
        kv_tools(server, kv, call)
        document_tools(server, documents, call)
        search_tools(server, SearchService(service, documents, kv), call)
        # the full runtime's server also has the knowledge plane (issue 25)
        knowledge_tools(server, MergedRecall(KnowledgeService(service)), call)
        # the compiled memory index (issue 24, API-3): a tool and a resource
        index_tools(server, index or IndexService(service), call, principal_for_request, harvest)
        # the entity graph (issue 26): the service's own when it builds one as it writes
        own = service.graph
        graph = own if isinstance(own, GraphService) else GraphService(service)
        graph_tools(server, graph, call)
        merge_tools(server, graph, call)  # versioned, reversible entity merges
        placing = service.placement  # GRAPH-2: the placement policy tool
        placement_tools(
            server,
            placing if isinstance(placing, Placement) else Placement(GraphService(service)),
            call,
        )
    return server


RoleName = Literal["user", "assistant", "system", "tool", "fact"]


def _session_tools(
    server: MCPServer,
    sessions: SessionService,
    call: Callable[[Context, Callable[[Principal], Any]], CallToolResult],
) -> None:
    """session_append, session_history and memory_promote (SESSION, PROMO-1)."""
    writer = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(
        name="session_append",
        title="Append a session turn",
        description=d.SESSION_APPEND,
        annotations=writer,
    )
    def session_append(
        session_id: Annotated[str, Field(description=d.SESSION)],
        role: Annotated[RoleName, Field(description=d.ROLE)],
        content: Annotated[str, Field(description=d.CONTENT)],
        ctx: Context,
        metadata: Annotated[dict[str, Any] | None, Field(description=d.METADATA_SHORT)] = None,
        observed_at: Annotated[str | None, Field(description=d.TURN_OBSERVED_AT)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: sessions.append(
                who, session_id, role, content, metadata=metadata, observed_at=observed_at
            ).to_dict(),
        )

    @server.tool(
        name="session_history",
        title="Read a session",
        description=d.SESSION_HISTORY,
        annotations=reader,
    )
    def session_history(
        session_id: Annotated[str, Field(description=d.SESSION)],
        ctx: Context,
        after: Annotated[int, Field(description=d.AFTER, ge=0)] = 0,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: {
                "turns": [t.to_dict() for t in sessions.history(who, session_id, after=after)]
            },
        )

    @server.tool(
        name="memory_promote", title="Promote a session", description=d.PROMOTE, annotations=writer
    )
    def memory_promote(
        session_id: Annotated[str, Field(description=d.SESSION)],
        ctx: Context,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        def act(who: Principal) -> dict[str, Any]:
            job, created = sessions.promote(who, session_id)
            return {"job": job_handle(job), "created": created}

        return call(ctx, act)


def _untitled(schema: Any) -> Any:
    """A JSON Schema without its ``title`` annotations (a property named ``title`` stays)."""
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _untitled(item) for name, item in value.items()}
        else:
            out[key] = _untitled(value)
    return out


def _dicts(memories: list[MemoryVersion]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in memories]


def _success(data: Any, render_text: Callable[[Any], str] | None = None) -> CallToolResult:
    """The result dict as structured content, and as text for the model: the same JSON, or
    for memories a defanged data block (SAFE-2)."""
    data, text = _encodable(data)
    if render_text is not None:
        text = render_text(data)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _encodable(data: Any) -> tuple[Any, str]:
    """``data`` and its JSON text, both safe to send: a stored lone surrogate (or a value JSON
    cannot carry) would make the SDK fail to write the answer, and a stdio client would wait
    forever (issue 20). Such values are replaced, with a warning (see :func:`json_safe`)."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        text.encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError, TypeError) as exc:
        log.warning(
            "a tool result held a value JSON cannot carry (%s); lone surrogates were replaced "
            "by U+FFFD, non-finite numbers by null and deep nesting cut",
            type(exc).__name__,
        )
        data = json_safe(data)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return data, text


def _clean(text: str) -> str:
    """Text a stored lone surrogate cannot keep from being sent (replaced by U+FFFD)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        log.warning("a tool result held a lone surrogate; it was replaced by U+FFFD")
        return clean_text(text)
    return text


def _failure(exc: QuipuError) -> CallToolResult:
    """A tool error: text ``"<code>: <message>"`` plus the HTTP error envelope as structure."""
    metrics.observe_refusal(exc.code, "mcp")
    envelope = exc.to_dict()
    if isinstance(exc, LimitExceeded) and exc.retry_after is not None:
        envelope["error"]["details"] = {**exc.details, "retry_after": exc.retry_after}
    envelope, _ = _encodable(json_safe(envelope))
    text = f"{exc.code}: {envelope['error']['message']}"
    details = envelope["error"]["details"]
    if details:
        text += " " + json.dumps(details, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=envelope, is_error=True
    )
