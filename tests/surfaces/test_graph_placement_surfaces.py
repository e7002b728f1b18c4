"""Placement by ontology on every surface (issue 26, GRAPH-2): the policy is declared by an
admin key over HTTP, both clients, MCP and the CLI; a key holding both tenant grants writes a
memory that lands in the tenant scope through ``POST /v1/memories``, one without stays private;
hostile declarations are 4xx with stable codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client as MCPClient
from typer.testing import CliRunner

from quipu import AsyncClient, Client
from quipu.composition import load_settings
from quipu.core.placement import GRAPH_TENANT_GRANT
from quipu.core.records import Principal, Role
from quipu.core.scopes import TENANT_WRITE_GRANT
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Conflict, Forbidden
from quipu.governance import GovernanceService
from quipu.graph.placement import Placement
from quipu.graph.service import GraphService
from quipu.memories import MemoryService
from quipu.surfaces.cli.app import app as cli_app
from quipu.surfaces.http.server import build_server
from quipu.surfaces.mcp import create_mcp_server
from quipu.surfaces.mcp.placement import PLACEMENT_TOOL_NAMES
from tests.support.live_server import LiveServer

POLICY = [{"type": "service", "scope": "tenant", "names": ["Checkout API"]}]


@dataclass
class World:
    url: str
    keys: dict[str, str]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("placement")
    s = load_settings({"database": str(folder / "p.db"), "auth": True}, environ={})
    app, runtime = build_server(s, local_embedder)
    access = app.state.access
    access.create_tenant("t")
    keys: dict[str, str] = {}
    _, keys["admin"] = access.create_key("t", "admin", agent_id="ops")
    both = {TENANT_WRITE_GRANT, GRAPH_TENANT_GRANT}
    _, keys["both"] = access.create_key("t", "agent", agent_id="w", user_id="uw", grants=both)
    _, keys["plain"] = access.create_key("t", "agent", agent_id="p", user_id="up")
    server = LiveServer(app)
    yield World(server.url, keys)
    server.close()
    runtime.close()


def test_graph_2_http_and_clients_declare_and_remember_places(world: World) -> None:
    """GRAPH-2 over HTTP: the admin declares (versioned), a key with both grants is placed in
    the tenant scope by ``remember``, a key without them stays in its own; stale versions 409,
    non-admin 403."""
    with Client(world.url, world.keys["admin"]) as admin:
        assert admin.graph_placement()["version"] == 0
        first = admin.graph_placement(types=POLICY, reason="shared services")
        assert first["version"] == 1 and first["types"][0]["names"] == ["Checkout API"]
        with pytest.raises(Conflict):
            admin.graph_placement(types=POLICY, expected_version=0)
    with Client(world.url, world.keys["both"]) as writer:
        placed = writer.remember("The Checkout API requires two approvals.")
        assert placed.scope.value == "tenant"
        with pytest.raises(Forbidden):
            writer.graph_placement(types=POLICY)
        assert writer.graph_placement(version=1)["types"] == first["types"]
    with Client(world.url, world.keys["plain"]) as plain:
        kept = plain.remember("The Checkout API rejects my token.")
        assert kept.scope.value == "agent"
        tenant = plain.graph_recall("Checkout API", scope="tenant")
        assert [e["type"] for e in tenant["entities"]] == ["service"]

    async def main() -> None:
        async with AsyncClient(world.url, world.keys["admin"]) as client:
            again = await client.graph_placement(types=POLICY, expected_version=1)
            assert again["version"] == 2
            assert (await client.graph_placement())["version"] == 2

    anyio.run(main)


def test_graph_2_http_hostile_declarations_are_4xx(world: World) -> None:
    """GRAPH-2: hostile bodies and query strings on /v1/graph/placement: a 4xx with a stable
    code, never a 500."""
    headers = {"authorization": f"Bearer {world.keys['admin']}"}
    with httpx.Client(base_url=world.url, headers=headers) as http:
        for body, code in (
            ({"types": [{"type": "a/b"}]}, "invalid_name"),
            ({"types": [{"type": "a\u0000b"}]}, "invalid_text"),  # the HTTP layer refuses NUL
            ({"types": [{"type": "t" * 100_000}]}, "invalid_name"),
            ({"types": [{"type": "x", "scope": "global"}]}, "invalid_placement"),
            ({"types": [{"type": "x", "names": ["a\u0000"]}]}, "invalid_text"),
            ({"types": [{"type": "x", "names": [{"deep": [[[[]]]]}]}]}, "invalid_placement"),
            ({"types": [7]}, "invalid_placement"),
        ):
            r = http.put("/v1/graph/placement", json=body)
            assert r.status_code == 422, (body, r.status_code, r.text)
            assert r.json()["error"]["code"] == code, (body, r.text)
        for params in ({"version": "-1"}, {"version": str(10**40)}, {"version": "x"}):
            r = http.get("/v1/graph/placement", params=params)
            assert 400 <= r.status_code < 500, (params, r.status_code)
            assert r.json()["error"]["code"]
        r = http.put("/v1/graph/placement", json={"types": [], "tenant_id": "other"})
        assert r.status_code == 422
    plain = {"authorization": f"Bearer {world.keys['plain']}"}
    with httpx.Client(base_url=world.url, headers=plain) as http:
        assert http.put("/v1/graph/placement", json={"types": POLICY}).status_code == 403


def test_graph_2_mcp_tool(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    """GRAPH-2 over MCP: ``graph_placement`` reads the policy, an admin declares with it, an
    agent's declaration is refused, hostile type names are an error with a stable code."""
    from quipu.core.limits import Limits
    from quipu.storage.sqlite.store import SQLiteStore

    service = MemoryService(SQLiteStore(tmp_path / "mcp.db"), local_embedder, Limits())
    service.graph = GraphService(service)
    service.placement = Placement(service.graph)
    admin = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
    agent = Principal("t1", "key-a", Role.AGENT, agent_id="a")
    who = [admin]
    server = create_mcp_server(service, lambda _ctx: who[0], governance=GovernanceService(service))

    async def main() -> None:
        async with MCPClient(server) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert set(PLACEMENT_TOOL_NAMES) <= tools
            r = await client.call_tool("graph_placement", {"types": POLICY})
            assert not r.is_error and r.structured_content["version"] == 1
            r = await client.call_tool("graph_placement", {"types": [{"type": "A B"}]})
            assert r.is_error and r.structured_content["error"]["code"] == "invalid_name"
            who[0] = agent
            r = await client.call_tool("graph_placement", {})
            assert not r.is_error and r.structured_content["types"][0]["type"] == "service"
            r = await client.call_tool("graph_placement", {"isolated": ["a"]})
            assert r.is_error and r.structured_content["error"]["code"] == "forbidden"

    anyio.run(main)
    service.close()
    service.store.close()


def test_graph_2_cli_declares_and_reads(tmp_path: Path) -> None:
    """GRAPH-2 on the CLI: ``quipu graph placement --declare FILE`` then the read; a malformed
    file exits 1 with a stable code."""
    db = str(tmp_path / "cli.db")
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"types": POLICY, "reason": "ops"}), encoding="utf-8")
    runner = CliRunner()
    out = runner.invoke(cli_app, ["graph", "placement", "--declare", str(policy), "--db", db])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["version"] == 1
    out = runner.invoke(cli_app, ["graph", "placement", "--db", db])
    assert out.exit_code == 0 and json.loads(out.output)["types"] == POLICY
    policy.write_text('{"types": [{"type": "a/b"}]}', encoding="utf-8")
    out = runner.invoke(cli_app, ["graph", "placement", "--declare", str(policy), "--db", db])
    assert out.exit_code == 1 and "invalid_name" in out.output
    policy.write_text("[1, 2]", encoding="utf-8")
    out = runner.invoke(cli_app, ["graph", "placement", "--declare", str(policy), "--db", db])
    assert out.exit_code == 1 and "invalid_placement" in out.output
