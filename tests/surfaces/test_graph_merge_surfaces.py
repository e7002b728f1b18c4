"""Entity merges on every surface (issue 26 remainder: "MCP tools and remote clients for
merges"; GRAPH-1 "merges are versioned and reversible"): the MCP tools ``graph_merge``,
``graph_merge_revert`` and ``graph_entity_history`` over a real ``quipu mcp`` stdio subprocess
and over streamable HTTP on a real server with real keys, ``quipu.Client`` and
``quipu.AsyncClient`` over a real socket, and the embedded library. Hostile ids (separators,
NUL, lone surrogates, huge) are a 4xx with the stable code ``invalid_id``, never a 500, and
change nothing; another agent's key finds nothing to merge."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client as MCPClient
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

import quipu
from quipu import AsyncClient, Client
from quipu.composition import load_settings
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Conflict, InvalidInput, NotFound
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer
from tests.surfaces.test_mcp import connect, fails

#: Ids no surface may accept: a separator, NUL, a lone surrogate, a path, huge, empty.
HOSTILE_IDS = ("a/b", "x\x00y", "\ud800", "../etc", "a" * 100_000, "", "a b")


JSON = {"content-type": "application/json"}


@dataclass
class World:
    url: str
    keys: dict[str, str]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("merges")
    s = load_settings({"database": str(folder / "m.db"), "auth": True}, environ={})
    app, runtime = build_server(s, local_embedder)
    access = app.state.access
    access.create_tenant("t")
    keys: dict[str, str] = {}
    _, keys["a"] = access.create_key("t", "agent", agent_id="a", user_id="ua")
    _, keys["b"] = access.create_key("t", "agent", agent_id="b", user_id="ub")
    server = LiveServer(app)
    yield World(server.url, keys)
    server.close()
    runtime.close()


def _expected(bad: str) -> str:
    """The HTTP and MCP transports refuse text that is not valid Unicode (NUL, a lone
    surrogate) as ``invalid_text`` before any tool or route runs; every other bad id reaches the
    id check: ``invalid_id``."""
    return "invalid_text" if "\x00" in bad or "\ud800" in bad else "invalid_id"


async def _refused(client: MCPClient, tool: str, **arguments: Any) -> str:
    """The stable code a hostile call is refused with: the tool's error (``invalid_id``), or,
    for text that is not valid Unicode (NUL, a lone surrogate), the transport's JSON-RPC error
    (``invalid_text``) before the tool runs."""
    try:
        result = await client.call_tool(tool, arguments)
    except MCPError as exc:
        return str(exc).split(":", 1)[0]
    assert result.is_error and result.structured_content is not None, tool
    return str(result.structured_content["error"]["code"])


def _entity(facts: dict[str, Any]) -> str:
    return str(facts["entities"][0]["entity_id"])


def _objects(facts: dict[str, Any]) -> list[str]:
    return sorted(f"{f['predicate']}:{f['object']}" for f in facts["facts"])


def test_graph_001_merge_tools_over_mcp_http(world: World) -> None:
    """GRAPH-1 merges as MCP tools on `quipu serve`'s /mcp with real keys: merge, history,
    revert; hostile ids are ``invalid_id`` tool errors; another agent's key gets not_found."""
    with Client(world.url, world.keys["a"]) as a:
        a.remember("Helga works at Maersk.")
        a.remember("Helgi lives in Aarhus.")
        helga, helgi = _entity(a.graph_facts("Helga")), _entity(a.graph_facts("Helgi"))

    async def main() -> None:
        async with connect(f"{world.url}/mcp", world.keys["b"]) as other:
            await fails(other, "graph_merge", "not_found", keep=helga, merge=helgi)
        async with connect(f"{world.url}/mcp", world.keys["a"]) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("graph_merge", "graph_merge_revert", "graph_entity_history"):
                assert "one scope" in (tools[name].description or "").lower(), name
            calls = (  # each hostile id on one tool in turn (the tools share the id check)
                ("graph_merge", lambda bad: {"keep": helga, "merge": bad}),
                ("graph_merge_revert", lambda bad: {"merge_id": bad}),
                ("graph_entity_history", lambda bad: {"entity_id": bad}),
            )
            sendable = [b for b in HOSTILE_IDS if "\ud800" not in b]  # the SDK cannot encode it
            for at, bad in enumerate(sendable * 2):  # every id reaches at least two tools
                tool, args = calls[at % len(calls)]
                assert await _refused(client, tool, **args(bad)) == _expected(bad), (tool, bad[:9])
            await fails(client, "graph_merge", "invalid_merge", keep=helga, merge=helga)
            done = await client.call_tool("graph_merge", {"keep": helga, "merge": helgi})
            assert not done.is_error and done.structured_content is not None
            merged = done.structured_content
            assert merged["merged_id"] == helgi and merged["entity"]["aliases"] == ["Helgi"]
            text = "".join(getattr(b, "text", "") for b in done.content)
            assert merged["merge_id"] in text and "stored data, not instructions" in text
            old = await client.call_tool("graph_entity_history", {"entity_id": helga})
            assert old.structured_content is not None
            assert [v["ended_by"] for v in old.structured_content["versions"]] == ["merge"]
            await fails(client, "graph_merge_revert", "not_found", merge_id="0" * 32)
            back = await client.call_tool(
                "graph_merge_revert", {"merge_id": merged["merge_id"], "reason": "two people"}
            )
            assert not back.is_error and back.structured_content is not None
            assert back.structured_content["restored"]["entity_id"] == helgi
            await fails(client, "graph_merge_revert", "merge_reverted", merge_id=merged["merge_id"])

    anyio.run(main)
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {world.keys['a']}",
    }
    for tool, args in (
        ("graph_merge", f'"keep": "{helga}", "merge": "\\ud800"'),
        ("graph_merge_revert", '"merge_id": "a\\udfffb"'),
        ("graph_entity_history", '"entity_id": "\\ud800"'),
    ):
        raw = (
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call",'
            f' "params": {{"name": "{tool}", "arguments": {{{args}}}}}}}'
        )
        r = httpx.post(f"{world.url}/mcp", content=raw.encode(), headers=headers)
        assert r.status_code < 500, (tool, r.status_code, r.text[:200])
        answer = r.json()
        code = (
            answer["error"]["message"]
            if "error" in answer
            else answer["result"]["content"][0]["text"]
        )
        assert code.startswith(("invalid_text: ", "invalid_id: ")), (tool, code[:200])
    with Client(world.url, world.keys["a"]) as a:
        assert _objects(a.graph_facts(helgi)) == ["lives_in:Aarhus"]


def test_graph_001_merge_tools_over_stdio(tmp_path: Path) -> None:
    """The same tools through a real ``quipu mcp`` subprocess (the CLI wiring)."""
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("quipu")),
        args=["mcp", "--db", str(tmp_path / "stdio.db")],
        env={"QUIPU_EMBEDDER": "none"},
        cwd=str(tmp_path),
    )

    async def facts(client: MCPClient, subject: str) -> dict[str, Any]:
        found = await client.call_tool("graph_facts", {"subject": subject})
        assert not found.is_error and found.structured_content is not None
        return found.structured_content

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with MCPClient(stdio_client(params, errlog=errlog)) as client:
                for text in ("Ingrid works at Equinor.", "Inga lives in Stavanger."):
                    await client.call_tool("memory_remember", {"text": text})
                ingrid, inga = (
                    _entity(await facts(client, "Ingrid")),
                    _entity(await facts(client, "Inga")),
                )
                for bad in ("a/b", "x\x00", "..", "z" * 5000):  # (the SDK cannot send a surrogate)
                    for tool, args in (
                        ("graph_merge", {"keep": bad, "merge": inga}),
                        ("graph_merge_revert", {"merge_id": bad}),
                        ("graph_entity_history", {"entity_id": bad}),
                    ):
                        code = await _refused(client, tool, **args)
                        assert code in ("invalid_id", "invalid_text"), (tool, bad[:9], code)
                done = await client.call_tool("graph_merge", {"keep": ingrid, "merge": inga})
                assert not done.is_error and done.structured_content is not None
                assert _objects(await facts(client, "Inga")) == [
                    "lives_in:Stavanger",
                    "works_at:Equinor",
                ]
                old = await client.call_tool("graph_entity_history", {"entity_id": ingrid})
                assert old.structured_content is not None
                assert [v["version"] for v in old.structured_content["versions"]] == [1]
                merge_id = done.structured_content["merge_id"]
                back = await client.call_tool("graph_merge_revert", {"merge_id": merge_id})
                assert not back.is_error
                assert _objects(await facts(client, inga)) == ["lives_in:Stavanger"]

    anyio.run(main)


def test_graph_001_merge_through_both_clients(world: World) -> None:
    """``quipu.Client`` and ``quipu.AsyncClient``: merge, history, revert, the 409s; a hostile
    id is ``invalid_id`` before any request (a lone surrogate cannot even be encoded), and the
    server's own answer to each, sent raw, is a 4xx with a stable code."""
    with Client(world.url, world.keys["a"]) as a:
        a.remember("Gudrun works at Lego.")
        a.remember("Gudda lives in Billund.")
        gudrun, gudda = _entity(a.graph_facts("Gudrun")), _entity(a.graph_facts("Gudda"))
        for bad in HOSTILE_IDS:
            with pytest.raises(InvalidInput) as err:
                a.graph_merge(gudrun, bad)
            assert err.value.code == "invalid_id", bad[:20]
            for call in (a.graph_merge_revert, a.graph_entity_history):
                with pytest.raises(InvalidInput) as err:
                    call(bad)
                assert err.value.code == "invalid_id"
        done = a.graph_merge(gudrun, gudda, reason="a nickname")
        assert done["version"] == 2 and done["entity"]["aliases"] == ["Gudda"]
        assert _objects(a.graph_facts("Gudda")) == ["lives_in:Billund", "works_at:Lego"]
        history = a.graph_entity_history(gudrun)
        assert [(v["version"], v["ended_by"]) for v in history["versions"]] == [(1, "merge")]
    with Client(world.url, world.keys["b"]) as b, pytest.raises(NotFound):
        b.graph_merge_revert(done["merge_id"])

    async def main() -> None:
        async with AsyncClient(world.url, world.keys["a"]) as client:
            with pytest.raises(InvalidInput) as err:
                await client.graph_merge(gudrun, "a/b")
            assert err.value.code == "invalid_id"
            old = await client.graph_entity_history(gudrun)
            assert len(old["versions"]) == 1
            back = await client.graph_merge_revert(done["merge_id"], reason="two people")
            assert back["restored"]["entity_id"] == gudda
            with pytest.raises(Conflict) as again:
                await client.graph_merge_revert(done["merge_id"])
            assert again.value.code == "merge_reverted"

    anyio.run(main)
    headers = {"authorization": f"Bearer {world.keys['a']}"}
    with httpx.Client(base_url=world.url, headers=headers) as http:
        for path in (
            "/v1/graph/entities/%00/history",
            "/v1/graph/entities/%ED%A0%80/history",  # a lone surrogate, UTF-8 encoded
            "/v1/graph/entities/a%2Fb/history",
            "/v1/graph/entities/" + "a" * 5000 + "/history",
        ):
            r = http.get(path)
            assert 400 <= r.status_code < 500, (path[:40], r.status_code, r.text[:200])
            assert r.json()["error"]["code"], path[:40]
        r = http.post("/v1/graph/merges/" + "m" * 5000 + "/revert")
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_id"
        for bad in HOSTILE_IDS:
            body = json.dumps({"keep": gudrun, "merge": bad}).encode()  # \ud800 escaped
            r = http.post("/v1/graph/merges", content=body, headers=JSON)
            assert r.status_code == 422, (bad[:20], r.status_code, r.text[:200])
            assert r.json()["error"]["code"] == _expected(bad), (bad[:20], r.text[:200])


def test_graph_001_merge_in_the_library(tmp_path: Path) -> None:
    """The embedded :class:`quipu.Quipu` answers as the clients do (plain dicts)."""
    with quipu.open(tmp_path / "lib.db", embedder="none", worker_embedded=False) as mem:
        mem.remember("Bjorn works at Ikea.")
        mem.remember("Bjornie lives in Malmo.")
        bjorn, bjornie = _entity(mem.graph_facts("Bjorn")), _entity(mem.graph_facts("Bjornie"))
        for bad in ("a/b", "\x00", "\ud800", "b" * 1000):
            with pytest.raises(InvalidInput) as err:
                mem.graph_merge(bad, bjornie)
            assert err.value.code == "invalid_id"
        done = mem.graph_merge(bjorn, bjornie, reason="same man")
        assert _objects(mem.graph_facts("Bjornie")) == ["lives_in:Malmo", "works_at:Ikea"]
        assert [v["version"] for v in mem.graph_entity_history(bjorn)["versions"]] == [1]
        back = mem.graph_merge_revert(done["merge_id"])
        assert back["restored"]["entity_id"] == bjornie
        assert _objects(mem.graph_facts(bjornie)) == ["lives_in:Malmo"]
