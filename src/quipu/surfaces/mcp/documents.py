"""The documents tools (issue 28, DOC-1): document_add, document_search, document_read,
document_list and document_job. Each reads or writes exactly one scope's corpus; no tool takes
a tenant, owner or subject (SCOPE-2). Snippets and read text reach the model inside a data
block (SAFE-2); the structured content carries them exactly."""

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.documents import MAX_READ_CHARS
from quipu.core.records import Principal
from quipu.documents import DocumentService
from quipu.jobs.ingest import DocumentIngest
from quipu.safety import render_data_block

DOCUMENT_TOOL_NAMES = (
    "document_add",
    "document_search",
    "document_read",
    "document_list",
    "document_job",
)

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]
ScopeName = Literal["agent", "user", "agent_user", "tenant"]

ADD = """\
Keep a whole document — a manual, meeting notes, a page the user pasted — searchable by
meaning, in ONE scope's corpus (`scope`, default `agent`: private to you). Its text is cut into
verbatim chunks with their character offsets; a chunk holding a secret is refused (reported in
`refused`, not stored) and one that looks like a prompt injection is quarantined (never
served). `media_type`: text/plain, text/markdown or text/html. A document longer than the server's
`document_job_chars` (100,000 by default) is checked now and embedded by a background job: the
answer then holds `job` and `document_id`; follow it with document_job. Use memory_remember
instead for a short fact you want recalled; use kv_set for a value to read back exactly."""
SEARCH = """\
Find where something is written in the documents of ONE scope (`scope`, default `agent`); reads
exactly one scope's corpus. Answers pointers, never whole documents: document id and title,
chunk id, start and end offsets, a short snippet with the matching words marked « », and a
score. Read more around a hit with document_read(document_id, start, end)."""
READ = f"""\
Read a range of one document of ONE scope (`scope`, default `agent`), by character offsets from
document_search or document_list: at most {MAX_READ_CHARS} characters per call (`start`
defaults to 0, `end` to that far). Refused or quarantined chunks are never returned: their
spans are listed under `withheld`."""
LIST = """\
List the documents in ONE scope's corpus (`scope`, default `agent`), with their titles, sizes
and the embedding model the corpus is pinned to; reads exactly one scope. Check here before
concluding that a document was never added."""
JOB = """\
Follow the ingest job of a large document you added with document_add (its `job.job_id`):
`status` (queued, running, succeeded, failed, cancelled), `embedded` of `total` chunks, the
attempts and last error. A job writes one document into one scope's corpus; only its submitter
(or an admin) sees it."""
SCOPE = (
    "agent (default: private to you), user (about the end user, shared across agents), "
    "agent_user (you about this user), tenant (the whole organisation; writing needs a grant). "
    "One call reads or writes exactly one scope."
)


def search_text(data: Mapping[str, Any]) -> str:
    hits = data.get("results", [])
    lines = [
        f"[{h.get('document_id')} {h.get('start')}-{h.get('end')} score={h.get('score')}]"
        f" {h.get('title')}: {h.get('snippet')}"
        for h in hits
    ]
    return f"{len(hits)} document passages\n{render_data_block(lines, 'document')}"


def read_text(data: Mapping[str, Any]) -> str:
    head = {k: data.get(k) for k in ("document_id", "start", "end", "chars", "withheld")}
    summary = json.dumps(head, ensure_ascii=False)
    return f"{summary}\n{render_data_block([str(data.get('text', ''))], 'document')}"


def document_tools(server: MCPServer, documents: DocumentService, call: Call) -> None:
    """Register the documents tools on ``server`` (see the module docstring)."""
    writer = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    ingest = DocumentIngest(documents)
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(name="document_add", title="Add a document", description=ADD, annotations=writer)
    def document_add(
        content: Annotated[str, Field(description="The document's text, Markdown or HTML.")],
        title: Annotated[str, Field(description="A title, at most 500 characters.")],
        ctx: Context,
        media_type: Annotated[
            str, Field(description="text/plain, text/markdown or text/html.")
        ] = "text/plain",
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Small JSON object (no secrets).")
        ] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        def add(who: Principal) -> dict[str, Any]:
            if ingest.is_large(content):  # a durable job, as over HTTP (DOC-1)
                return ingest.submit(
                    who, content, title=title, media_type=media_type, scope=scope, metadata=metadata
                )
            return documents.add(
                who, content, title=title, media_type=media_type, scope=scope, metadata=metadata
            )

        return call(ctx, add, None)

    @server.tool(
        name="document_search", title="Search documents", description=SEARCH, annotations=reader
    )
    def document_search(
        query: Annotated[str, Field(description="What you are looking for.")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        k: Annotated[int | None, Field(description="How many pointers.", ge=1)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(ctx, lambda who: documents.search(who, query, scope=scope, k=k), search_text)

    @server.tool(
        name="document_read", title="Read a document range", description=READ, annotations=reader
    )
    def document_read(
        document_id: Annotated[str, Field(description="The document's id.")],
        ctx: Context,
        start: Annotated[int, Field(description="First character offset.", ge=0)] = 0,
        end: Annotated[int | None, Field(description="Offset after the last character.")] = None,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: documents.read(who, document_id, start=start, end=end, scope=scope),
            read_text,
        )

    @server.tool(name="document_list", title="List documents", description=LIST, annotations=reader)
    def document_list(
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        cursor: Annotated[str | None, Field(description="next_cursor of the last page.")] = None,
        limit: Annotated[int | None, Field(description="Page size.", ge=1)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx, lambda who: documents.list(who, scope=scope, cursor=cursor, limit=limit), None
        )

    @server.tool(
        name="document_job", title="Follow a document's ingest", description=JOB, annotations=reader
    )
    def document_job(
        job_id: Annotated[str, Field(description="job.job_id from document_add.")],
        ctx: Context,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(ctx, lambda who: ingest.progress(who, job_id), None)
