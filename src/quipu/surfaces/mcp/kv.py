"""The key/value tools (issue 28, KV-1): kv_set, kv_get, kv_list and kv_delete. Each reads or
writes exactly one scope; no tool takes a tenant, owner or subject (SCOPE-2). The structured
content carries the value exactly as stored; the text for the model shows it inside a data
block (SAFE-2), since a value is data, never instructions."""

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from quipu.core.kv import MAX_KEY_CHARS
from quipu.core.records import Principal
from quipu.kv import KeyValueService
from quipu.safety import render_data_block

KV_TOOL_NAMES = ("kv_set", "kv_get", "kv_list", "kv_delete")

Call = Callable[[Context, Callable[[Principal], Any], Callable[[Any], str] | None], CallToolResult]
ScopeName = Literal["agent", "user", "agent_user", "tenant"]

KV_SET = """\
Store a value under an exact key, for things you must read back exactly and never paraphrase:
a configuration value, an id, a counter, a checklist's state. Writes to ONE scope (`scope`,
default `agent`: private to you). The value is any JSON (object, list, string, number, bool,
null; no secrets). Each set is a new version; pass `expected_version` (from kv_get) to write only
if nobody changed it since, or 0 to create only if the key holds no value (`version_conflict`
otherwise: read again, then retry). Not searchable by meaning: use memory_remember for facts
you want recalled by a question."""
KV_GET = """\
Read the value under an exact key from ONE scope (`scope`, default `agent`), exactly as it was
set, with its version. Reads exactly one scope: a key set in another scope is `not_found` here.
`as_of` (ISO-8601) reads the value in force at that time."""
KV_LIST = """\
List the keys of ONE scope (`scope`, default `agent`) that start with `prefix`, in byte order,
with their values; reads exactly one scope. Pass `next_cursor` back as `cursor` for the next
page. Check here before concluding that a value was never stored."""
KV_DELETE = """\
Delete a key of ONE scope (`scope`, default `agent`). History keeps what it held; reads answer
`not_found` from now on. `expected_version` deletes only the version you read."""
KEY = (
    f"The key: 1-{MAX_KEY_CHARS} ASCII characters, '/'-separated segments of letters, digits "
    "and . _ : @ + = ~ -, each segment starting with a letter, digit or _ (e.g. app/theme)."
)
SCOPE = (
    "agent (default: private to you), user (about the end user, shared across agents), "
    "agent_user (you about this user), tenant (the whole organisation; writing needs a grant). "
    "One call reads or writes exactly one scope."
)


def _line(entry: Mapping[str, Any]) -> str:
    value = json.dumps(entry.get("value"), ensure_ascii=False)
    return f"[{entry.get('key')} v{entry.get('version')} {entry.get('scope')}] {value}"


def entry_text(data: Mapping[str, Any]) -> str:
    return f"1 value\n{render_data_block([_line(data)], 'kv')}"


def page_text(data: Mapping[str, Any]) -> str:
    items = data.get("items", [])
    cursor = data.get("next_cursor")
    more = f"; next_cursor: {cursor}" if cursor else ""
    return f"{len(items)} keys{more}\n{render_data_block([_line(e) for e in items], 'kv')}"


def kv_tools(server: MCPServer, kv: KeyValueService, call: Call) -> None:
    """Register the key/value tools on ``server`` (see the module docstring)."""
    writer = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    reader = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(name="kv_set", title="Set a key", description=KV_SET, annotations=writer)
    def kv_set(
        key: Annotated[str, Field(description=KEY)],
        value: Annotated[Any, Field(description="Any JSON value (no secrets).")],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        expected_version: Annotated[
            int | None,
            Field(description="0: create only; n: only if the current version is n.", ge=0),
        ] = None,
        reason: Annotated[str | None, Field(description="Why (kept in history).")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: kv.set(
                who, key, value, scope=scope, expected_version=expected_version, reason=reason
            ).to_dict(),
            entry_text,
        )

    @server.tool(name="kv_get", title="Get a key", description=KV_GET, annotations=reader)
    def kv_get(
        key: Annotated[str, Field(description=KEY)],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        as_of: Annotated[str | None, Field(description="Read the value at this time.")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx, lambda who: kv.get(who, key, scope=scope, as_of=as_of).to_dict(), entry_text
        )

    @server.tool(name="kv_list", title="List keys", description=KV_LIST, annotations=reader)
    def kv_list(
        ctx: Context,
        prefix: Annotated[str, Field(description="Keys starting with this ('' for all).")] = "",
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        cursor: Annotated[str | None, Field(description="next_cursor of the last page.")] = None,
        limit: Annotated[int | None, Field(description="Page size.", ge=1)] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: kv.list(
                who, prefix=prefix, scope=scope, cursor=cursor, limit=limit
            ).to_dict(),
            page_text,
        )

    @server.tool(name="kv_delete", title="Delete a key", description=KV_DELETE, annotations=writer)
    def kv_delete(
        key: Annotated[str, Field(description=KEY)],
        ctx: Context,
        scope: Annotated[ScopeName, Field(description=SCOPE)] = "agent",
        expected_version: Annotated[
            int | None, Field(description="The version you read.", ge=0)
        ] = None,
        reason: Annotated[str | None, Field(description="Why (kept in history).")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        return call(
            ctx,
            lambda who: kv.delete(
                who, key, scope=scope, expected_version=expected_version, reason=reason
            ).to_dict(),
            entry_text,
        )
