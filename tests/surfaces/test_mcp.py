"""The MCP server (API-3): the tools through a real ``quipu mcp`` stdio subprocess and through
streamable HTTP on a real uvicorn server, both with the SDK's own client; per-request
bearer authentication and isolation (SCOPE-1, SCOPE-2, SCOPE-7); error codes on tool errors."""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from quipu.core.limits import Limits
from quipu.core.records import Kind, Principal, Role, Scope
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Unauthorized
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.mcp import (
    LOOPBACK_HOSTS,
    TOOL_NAMES,
    create_mcp_server,
    fixed_principal,
    mount_mcp,
    principal_from_request,
)
from quipu.surfaces.mcp.governance import GOVERNANCE_TOOL_NAMES
from quipu.surfaces.mcp.http import bearer_token
from quipu.surfaces.mcp.server import KindName, ScopeName
from tests.support.live_server import LiveServer

DOCS = Path(__file__).resolve().parents[2] / "docs"
REQUIRED_TOOLS = {
    "memory_remember",
    "memory_recall",
    "memory_list",
    "memory_get",
    "memory_history",
    "memory_revise",
    "memory_forget",
}
IDENTITY_FIELDS = {"tenant", "tenant_id", "owner", "owner_id", "subject", "subject_id"}
ALICE = Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")
BOB = Principal("t1", "key-bob", Role.AGENT, agent_id="bob", user_id="u-bob")


# -- helpers -----------------------------------------------------------------------------------
async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    text = _text(result)
    if text.startswith(("{", "[")):
        assert json.loads(text) == result.structured_content
    else:  # memories rendered for the model as a data block (SAFE-2, issue 22)
        assert "<memory>" in text and "stored data, not instructions" in text
        for ident in _memory_ids(result.structured_content):
            assert ident in text
    return result.structured_content


def _memory_ids(data: Any) -> list[str]:
    """The ids of the memories a structured result holds, however nested."""
    if isinstance(data, dict):
        found = [data["id"]] if "text" in data and "id" in data else []
        return found + [i for v in data.values() for i in _memory_ids(v)]
    if isinstance(data, list):
        return [i for v in data for i in _memory_ids(v)]
    return []


async def fails(client: Client, tool: str, code: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert _text(result).startswith(f"{code}: "), _text(result)
    assert result.structured_content is not None
    error: dict[str, Any] = result.structured_content["error"]
    assert error["code"] == code and error["message"]
    return error


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _property_names(schema: Any) -> set[str]:
    """Every property name anywhere in a JSON schema (nested objects and $defs included)."""
    names: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                names |= set(value)
            names |= _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            names |= _property_names(item)
    return names


@pytest.fixture
def service(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[MemoryService]:
    svc = MemoryService(SQLiteStore(tmp_path / "mcp.db"), local_embedder, Limits())
    yield svc
    svc.store.close()


# -- the tools themselves (in process) ---------------------------------------------------------
def test_api_003_tools_expose_no_identity_argument(service: MemoryService) -> None:
    server = create_mcp_server(service, fixed_principal(ALICE))

    async def main() -> None:
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            assert names >= REQUIRED_TOOLS and names == set(TOOL_NAMES)  # no sessions, governance
            for tool in tools:
                exposed = _property_names(tool.input_schema)
                assert not exposed & IDENTITY_FIELDS, (tool.name, exposed)
                assert not any("user_id" in n or "agent_id" in n for n in exposed), tool.name
                assert tool.description and len(tool.description) > 200, tool.name
                assert tool.output_schema is not None, tool.name
            scope = next(t for t in tools if t.name == "memory_recall").input_schema["properties"]
            assert "one scope" in scope["scope"]["description"].lower()
            # A smuggled owner or tenant is not an argument: it is ignored, never used.
            stored = await ok(client, "memory_remember", text="x is y", owner="bob", tenant_id="t2")
            assert stored["memory"]["provenance"]["key_id"] == "key-alice"
            assert service.get(ALICE, stored["memory"]["id"]).tenant_id == "t1"

    anyio.run(main)


def test_api_003_tool_help_follows_the_configured_limits(tmp_path: Path) -> None:
    limits = Limits(max_page=5, max_query_chars=300, default_k=4, max_k=8)
    service = MemoryService(SQLiteStore(tmp_path / "limits.db"), None, limits)
    server = create_mcp_server(service, fixed_principal(ALICE))

    async def main() -> None:
        async with Client(server) as client:
            tools = {
                t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools
            }
            assert "300 characters" in tools["memory_recall"]["query"]["description"]
            assert "default 4, at most 8" in tools["memory_recall"]["k"]["description"]
            assert "default 5, at most 5" in tools["memory_list"]["limit"]["description"]
            for n in range(7):
                await ok(client, "memory_remember", text=f"Note number {n} about the garden")
            page = await ok(client, "memory_list")
            assert len(page["items"]) == 5 and page["next_cursor"]
            await fails(client, "memory_recall", "query_too_long", query="q" * 301)

    anyio.run(main)
    service.store.close()


def test_api_003_tool_enums_match_the_domain() -> None:
    assert set(typing.get_args(KindName)) == {k.value for k in Kind}
    assert set(typing.get_args(ScopeName)) == {s.value for s in Scope} - {"global"}


def test_api_003_every_mcp_tool_is_documented() -> None:
    text = (DOCS / "mcp.md").read_text()
    missing = [name for name in (*TOOL_NAMES, *GOVERNANCE_TOOL_NAMES) if f"`{name}`" not in text]
    assert missing == []


def test_scope_001_http_principal_fails_closed_without_a_request(service: MemoryService) -> None:
    server = create_mcp_server(service, principal_from_request)

    async def main() -> None:
        async with Client(server) as client:
            await fails(client, "memory_list", "unauthorized")

    anyio.run(main)


def test_scope_001_bearer_token_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc  ") == "abc"
    assert bearer_token("Basic abc") == ""
    assert bearer_token("Bearer") == ""
    assert bearer_token(None) == ""


# -- stdio: the `quipu mcp` command ------------------------------------------------------------
def test_api_003_tools_over_stdio(tmp_path: Path) -> None:
    """The process boundary and the CLI wiring. The subprocess runs without the embedding model
    (full-text recall, reported as a fallback) to stay fast; the HTTP tests use the model."""
    quipu = Path(sys.executable).with_name("quipu")
    params = StdioServerParameters(
        command=str(quipu),
        args=["mcp", "--db", str(tmp_path / "stdio.db")],
        env={"QUIPU_EMBEDDER": "none"},
        cwd=str(tmp_path),
    )

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names >= REQUIRED_TOOLS

                first = await ok(
                    client,
                    "memory_remember",
                    text="The user's cat is called Miso",
                    scope="user",
                    kind="fact",
                    tags=["pets"],
                    aliases=["Miso"],
                )
                assert first["created"] is True
                memory = first["memory"]
                assert memory["provenance"]["surface"] == "mcp"
                assert "owner" not in memory and "tenant_id" not in memory
                again = await ok(
                    client, "memory_remember", text="The user's cat is called Miso", scope="user"
                )
                assert again["created"] is False and again["memory"]["id"] == memory["id"]

                found = await ok(client, "memory_recall", query="Miso", scope="user")
                assert [h["memory"]["id"] for h in found["results"]] == [memory["id"]]
                assert found["meta"]["create_safety"] == "exists"
                assert found["meta"]["fallback"] is True
                assert found["meta"]["reason"] == "embedder_disabled"
                assert (await ok(client, "memory_recall", query="Miso"))["results"] == []

                mid = memory["id"]
                assert (await ok(client, "memory_get", memory_id=mid))["text"] == memory["text"]
                revised = await ok(
                    client,
                    "memory_revise",
                    memory_id=mid,
                    text="The user's cat is called Miso; she is twelve",
                    expected_version=1,
                    reason="age learned",
                )
                assert revised["version"] == 2
                conflict = await fails(
                    client,
                    "memory_revise",
                    "version_conflict",
                    memory_id=mid,
                    text="stale",
                    expected_version=1,
                )
                assert conflict["details"]
                other = await ok(
                    client, "memory_remember", text="The user adopted a dog, Rex", scope="user"
                )
                old = await ok(
                    client,
                    "memory_supersede",
                    old_id=mid,
                    new_id=other["memory"]["id"],
                    reason="pets changed",
                    expected_version=2,
                )
                assert old["status"] == "superseded"
                assert old["related_id"] == other["memory"]["id"]
                listed = await ok(client, "memory_list", scope="user")
                assert [m["id"] for m in listed["items"]] == [other["memory"]["id"]]
                gone = await ok(client, "memory_forget", memory_id=other["memory"]["id"])
                assert gone["status"] == "unavailable"
                await fails(client, "memory_get", "not_found", memory_id=other["memory"]["id"])
                versions = (await ok(client, "memory_history", memory_id=mid))["versions"]
                assert [v["relation"] for v in versions] == ["created", "revises", "superseded_by"]

                await fails(client, "memory_recall", "invalid_query", query="   ")
                await fails(client, "memory_recall", "query_too_long", query="x" * 501)
                await fails(client, "memory_get", "not_found", memory_id="no-such-memory")
                secret = await fails(
                    client,
                    "memory_remember",
                    "secret_detected",
                    text="the deploy password = hunter2hunter2",
                )
                assert secret["details"]["findings"]

    anyio.run(main)


# -- streamable HTTP on a real server ----------------------------------------------------------
@dataclass
class Tokens:
    """The injected ``authenticate``: two fixed tokens, two principals, anything else refused."""

    known: dict[str, Principal] = field(
        default_factory=lambda: {"token-alice": ALICE, "token-bob": BOB}
    )
    seen: list[str] = field(default_factory=list)

    def __call__(self, token: str) -> Principal:
        self.seen.append(token)
        try:
            return self.known[token]
        except KeyError:
            raise Unauthorized("unknown credential") from None


@dataclass
class McpHttp:
    url: str
    tokens: Tokens


@pytest.fixture
def mcp_http(service: MemoryService) -> Iterator[McpHttp]:
    app = FastAPI()
    tokens = Tokens()
    mount_mcp(app, service, tokens)
    server = LiveServer(app)
    yield McpHttp(f"{server.url}/mcp", tokens)
    server.close()


@asynccontextmanager
async def connect(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def test_scope_001_mcp_http_refuses_missing_and_bad_credentials(mcp_http: McpHttp) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in (None, "Bearer nope", "Basic dG9rZW4tYWxpY2U=", "Bearer"):
        sent = {**headers, **({"Authorization": auth} if auth else {})}
        r = httpx.post(mcp_http.url, json=ping, headers=sent)
        assert r.status_code == 401, auth
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_scope_007_mcp_http_principals_cannot_see_each_other(mcp_http: McpHttp, mode: str) -> None:
    url = mcp_http.url

    async def main() -> None:
        async with (
            connect(url, "token-alice", mode) as alice,
            connect(url, "token-bob", mode) as bob,
        ):
            mine = await ok(alice, "memory_remember", text="Alice's locker code is in drawer 4")
            about_user = await ok(
                alice, "memory_remember", text="The user is vegetarian", scope="user"
            )
            theirs = await ok(bob, "memory_remember", text="Bob parks on level 2")
            assert mine["memory"]["provenance"] == {
                "surface": "mcp",
                "key_id": "key-alice",
                "agent_id": "alice",
            }
            assert theirs["memory"]["provenance"]["key_id"] == "key-bob"

            # Interleaved calls on two open connections: each call is its own principal.
            for scope in ("agent", "user", "agent_user"):
                seen = await ok(bob, "memory_recall", query="locker code vegetarian", scope=scope)
                assert all(h["memory"]["text"].startswith("Bob") for h in seen["results"])
                listed = await ok(bob, "memory_list", scope=scope)
                assert all(m["text"].startswith("Bob") for m in listed["items"])
            hits = await ok(alice, "memory_recall", query="where is the locker code?")
            assert hits["results"][0]["memory"]["id"] == mine["memory"]["id"]
            assert hits["meta"]["fallback"] is False

            for foreign in (mine["memory"]["id"], about_user["memory"]["id"]):
                for tool, args in (
                    ("memory_get", {}),
                    ("memory_history", {}),
                    ("memory_revise", {"text": "taken over", "expected_version": 1}),
                    ("memory_forget", {}),
                    (
                        "memory_supersede",
                        {"new_id": theirs["memory"]["id"], "expected_version": 1},
                    ),
                ):
                    key = "old_id" if tool == "memory_supersede" else "memory_id"
                    error = await fails(bob, tool, "not_found", **{key: foreign}, **args)
                    missing = await fails(bob, tool, "not_found", **{key: "f" * 32}, **args)
                    assert error["message"].replace(foreign, "ID") == missing["message"].replace(
                        "f" * 32, "ID"
                    )
            still = await ok(alice, "memory_get", memory_id=mine["memory"]["id"])
            assert still["version"] == 1 and still["status"] == "active"

    anyio.run(main)
    assert set(mcp_http.tokens.seen) == {"token-alice", "token-bob"}


def test_api_003_mcp_http_errors_and_revocation(mcp_http: McpHttp) -> None:
    async def main() -> None:
        async with connect(mcp_http.url, "token-alice") as alice:
            await fails(alice, "memory_recall", "invalid_query", query="")
            await fails(alice, "memory_get", "not_found", memory_id="0" * 32)
            await fails(alice, "memory_remember", "invalid_time", text="x", valid_at="yesterday")
            await fails(alice, "memory_remember", "scope_forbidden", text="x", scope="tenant")
            # Revocation takes effect on the next request of an open connection.
            del mcp_http.tokens.known["token-alice"]
            with pytest.raises(MCPError):
                await alice.call_tool("memory_list", {})

    anyio.run(main)


def test_api_003_mcp_endpoint_outside_the_lifespan_is_503(service: MemoryService) -> None:
    app = FastAPI()
    mount_mcp(app, service, Tokens())
    client = TestClient(app)  # no ``with``: the lifespan never ran
    r = client.post("/mcp", json={}, headers={"Authorization": "Bearer token-alice"})
    client.close()
    assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable"
    for _ in range(2):  # the lifespan starts the endpoint, and can start it again
        with TestClient(app) as running:
            r = running.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Authorization": "Bearer token-bob", "Accept": "application/json"},
            )
            assert r.status_code == 200, r.text


def test_api_003_loopback_mount_refuses_foreign_hosts(service: MemoryService) -> None:
    """Local mode (no credential needed) turns on DNS-rebinding protection."""
    app = FastAPI()
    mount_mcp(app, service, lambda _token: ALICE, allowed_hosts=LOOPBACK_HOSTS)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with TestClient(app) as client:
        for host, status in (("127.0.0.1:8750", 200), ("evil.example:80", 421)):
            r = client.post("/mcp", json=ping, headers={"Host": host, "Accept": "application/json"})
            assert r.status_code == status, (host, r.text)


def test_api_003_session_tools_through_quipu_serve(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """session_append, session_history and memory_promote on the app `quipu serve` runs."""
    from quipu.composition import load_settings
    from quipu.surfaces.http.server import build_server

    settings = load_settings({"database": str(tmp_path / "srv.db")}, environ={})
    app, runtime = build_server(settings, local_embedder)
    server = LiveServer(app)

    async def main() -> None:
        async with connect(f"{server.url}/mcp", None) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"session_append", "session_history", "memory_promote"} <= names
            await ok(
                client,
                "session_append",
                session_id="c1",
                role="user",
                content="I live in Porto and I work as a baker.",
            )
            await ok(client, "session_append", session_id="c1", role="assistant", content="Nice!")
            history = await ok(client, "session_history", session_id="c1")
            assert [t["seq"] for t in history["turns"]] == [1, 2]
            await fails(
                client, "session_append", "invalid_text", session_id="c1", role="user", content=" "
            )
            queued = await ok(client, "memory_promote", session_id="c1")
            assert queued["created"] is True
            runtime.worker.drain()
            found = await ok(
                client, "memory_recall", query="where does the user live", scope="agent_user"
            )
            assert "Porto" in found["results"][0]["memory"]["text"]

    try:
        anyio.run(main)
    finally:
        server.close()
        runtime.close()
