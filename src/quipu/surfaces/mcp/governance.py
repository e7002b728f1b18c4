"""The governance tools an agent has (issue 22): restore and merge its own memories, pin and
resolve snapshots of what it read, list projects, and, for a key holding the review grant, the
review queue, reviews and judgements. Erase and legal holds are compliance acts for operators
(HTTP API and CLI), not agent tools. No tool takes a tenant, owner or subject (SCOPE-2)."""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.records import Principal
from quipu.governance import GovernanceService
from quipu.governance.base import MAX_MERGE, MAX_SNAPSHOT_MEMBERS
from quipu.surfaces.mcp import render

GOVERNANCE_TOOL_NAMES = (
    "memory_restore",
    "memory_merge",
    "memory_snapshot",
    "memory_snapshot_resolve",
    "project_list",
    "review_queue",
    "review_decide",
    "memory_affirm",
    "memory_refute",
)

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]

RESTORE = """\
Bring back an earlier version of one of your memories: its text, tags, metadata and aliases
become a NEW version (relation `restores`); history is never rewound. Read memory_history
first to choose the version. Returns the new version."""
MERGE = """\
Merge duplicates of one scope into one memory: the FIRST id survives with `text` as its new
version (relation `merges`, naming the others), every other id becomes `superseded` by it.
Use it when recall shows the same fact stored several times. Returns the survivor."""
SNAPSHOT = """\
Pin exactly which memory versions you read, so a later run (or an evaluation) can cite and
re-read the same ones: `ids` pins each memory's current version; `recall_id` (from
recall_context) pins the memories that call showed you, as they were then. Returns the snapshot
id."""
SNAPSHOT_RESOLVE = """\
Read a snapshot back. Each member comes with its pinned version, or `withheld` with the reason
when it may no longer be read (quarantined, unavailable, erased, archived, expired, rejected,
not_found); a withheld member's old content is never returned."""
PROJECTS = """\
List the projects of your organisation. A memory's `project` must be one of these ids."""
REVIEW_QUEUE = """\
For keys with the review grant: the memories awaiting review, newest first: model output
(`candidate`) and suspected injections (`quarantined`)."""
REVIEW_DECIDE = """\
For keys with the review grant: activate or reject one memory awaiting review, with a reason.
You cannot review a memory your own key wrote (`self_review`)."""
AFFIRM = """\
For keys with the review grant: affirm that a memory is true, with a reason. It is stamped
with your key and the time, becomes `verified`, and a refuted one becomes active again."""
REFUTE = """\
For keys with the review grant: refute a memory, with a reason. It leaves recall and list
(history keeps it), stamped with your key and the time."""
REASON = "Why (required for reviews and judgements; kept in the audit log)."
EXPECTED = (
    "The memory's current version, as you read it (memory_get or memory_history): the change "
    "applies only if nobody changed it since (version_conflict otherwise)."
)


def governance_tools(server: MCPServer, governance: GovernanceService, call: Call) -> None:
    """Register the governance tools on ``server`` (see the module docstring)."""
    writer = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    memory_id_help = "The memory's id."
    max_page = governance.memory.limits.max_page  # bounds in the schema, not prose (issue 27)

    @server.tool(
        name="memory_restore", title="Restore a version", description=RESTORE, annotations=writer
    )
    def memory_restore(
        memory_id: Annotated[str, Field(description=memory_id_help)],
        version: Annotated[int, Field(description="The version whose content comes back.", ge=1)],
        expected_version: Annotated[int, Field(description=EXPECTED, ge=1)],
        ctx: Context,
        reason: Annotated[str | None, Field(description="Why.")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.restore(
                who, memory_id, version, reason=reason, expected_version=expected_version
            ).to_dict(),
            render.memory_text,
        )

    @server.tool(
        name="memory_merge", title="Merge duplicates", description=MERGE, annotations=writer
    )
    def memory_merge(
        ids: Annotated[
            list[str],
            Field(
                description="Memory ids; the first survives.", min_length=2, max_length=MAX_MERGE
            ),
        ],
        text: Annotated[str, Field(description="The merged statement.")],
        expected_version: Annotated[
            int, Field(description="The first (surviving) memory's current version.", ge=1)
        ],
        ctx: Context,
        reason: Annotated[str | None, Field(description="Why.")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.merge(
                who, ids, text, reason=reason, expected_version=expected_version
            ).to_dict(),
            render.memory_text,
        )

    @server.tool(
        name="memory_snapshot", title="Pin a snapshot", description=SNAPSHOT, annotations=writer
    )
    def memory_snapshot(
        ctx: Context,
        ids: Annotated[
            list[str] | None,
            Field(
                description="Memory ids to pin at their current version.",
                min_length=1,
                max_length=MAX_SNAPSHOT_MEMBERS,
            ),
        ] = None,
        recall_id: Annotated[
            str | None,
            Field(
                description="Or: pin what this recall_context call showed you, as it was then.",
                max_length=128,
            ),
        ] = None,
        label: Annotated[str | None, Field(description="A short label for the run.")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.snapshot_create(
                who, ids=ids, label=label, recall_id=recall_id
            ).to_dict(),
            None,
        )

    @server.tool(
        name="memory_snapshot_resolve",
        title="Resolve a snapshot",
        description=SNAPSHOT_RESOLVE,
        annotations=reader,
    )
    def memory_snapshot_resolve(
        snapshot_id: Annotated[str, Field(description="The snapshot's id.")], ctx: Context
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.snapshot_resolve(who, snapshot_id).to_dict(),
            render.snapshot_text,
        )

    @server.tool(
        name="project_list", title="List projects", description=PROJECTS, annotations=reader
    )
    def project_list(ctx: Context) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx, lambda who: {"items": [p.to_dict() for p in governance.projects(who)]}, None
        )

    @server.tool(
        name="review_queue", title="Review queue", description=REVIEW_QUEUE, annotations=reader
    )
    def review_queue(
        ctx: Context,
        status: Annotated[
            Literal["candidate", "quarantined"] | None, Field(description="Only this status.")
        ] = None,
        cursor: Annotated[str | None, Field(description="next_cursor of the last page.")] = None,
        limit: Annotated[int | None, Field(description="Page size.", ge=1, le=max_page)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        def act(who: Principal) -> dict[str, Any]:
            page = governance.review_queue(who, status=status, cursor=cursor, limit=limit)
            return {"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}

        return call(ctx, act, render.items_text)

    @server.tool(
        name="review_decide", title="Review a memory", description=REVIEW_DECIDE, annotations=writer
    )
    def review_decide(
        memory_id: Annotated[str, Field(description=memory_id_help)],
        decision: Annotated[Literal["activate", "reject"], Field(description="The decision.")],
        reason: Annotated[str, Field(description=REASON)],
        expected_version: Annotated[int, Field(description=EXPECTED, ge=1)],
        ctx: Context,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.review(
                who, memory_id, decision, reason=reason, expected_version=expected_version
            ).to_dict(),
            render.memory_text,
        )

    @server.tool(
        name="memory_affirm", title="Affirm a memory", description=AFFIRM, annotations=writer
    )
    def memory_affirm(
        memory_id: Annotated[str, Field(description=memory_id_help)],
        reason: Annotated[str, Field(description=REASON)],
        expected_version: Annotated[int, Field(description=EXPECTED, ge=1)],
        ctx: Context,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.affirm(
                who, memory_id, reason=reason, expected_version=expected_version
            ).to_dict(),
            render.memory_text,
        )

    @server.tool(
        name="memory_refute", title="Refute a memory", description=REFUTE, annotations=writer
    )
    def memory_refute(
        memory_id: Annotated[str, Field(description=memory_id_help)],
        reason: Annotated[str, Field(description=REASON)],
        expected_version: Annotated[int, Field(description=EXPECTED, ge=1)],
        ctx: Context,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: governance.refute(
                who, memory_id, reason=reason, expected_version=expected_version
            ).to_dict(),
            render.memory_text,
        )
