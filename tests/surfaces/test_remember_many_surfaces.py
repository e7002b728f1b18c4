"""``remember_many`` through ``quipu serve`` (issue 23, ingest; API-1, API-2, SAFE-1): POST
/v1/memories/batch called by ``quipu.Client``, ``quipu.AsyncClient`` and raw HTTP, and the
``memory_remember_many`` MCP tool, against the real app on a real socket with real keys. A
refused item comes back as the typed error the embedded client gives for it, in its slot."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import httpx
import pytest

from quipu import AsyncClient, Client
from quipu.composition import load_settings
from quipu.core.records import WriteResult
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import PayloadTooLarge, SecretDetected
from quipu.memory_batch import MAX_ITEMS
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer
from tests.surfaces.test_mcp import connect

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
ITEMS = [f"Turn {n}: the release train leaves platform {n} at {n + 6} o'clock." for n in range(9)]


@dataclass
class World:
    url: str
    key: str


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("bulk")
    s = load_settings({"database": str(folder / "b.db"), "auth": True}, environ={})
    app, runtime = build_server(s, local_embedder)
    app.state.access.create_tenant("t")
    _, key = app.state.access.create_key("t", "agent", agent_id="a", user_id="ua")
    server = LiveServer(app)
    yield World(server.url, key)
    server.close()
    runtime.close()


def test_api_023_remember_many_over_http_and_both_clients(world: World) -> None:
    """Item 7 holds a secret in its metadata: it comes back as SecretDetected in slot 7 (raw:
    status 422, code secret_detected), the others as WriteResults, a repeat as the duplicate;
    a list past MAX_ITEMS is 413 too_many_items, a text in place of the list is 422, a lone
    surrogate in an item is the transport's 422 invalid_text: never a 500."""
    items: list[object] = list(ITEMS[:7])
    items.append({"text": ITEMS[7], "metadata": {"note": f"token {TOKEN}"}})
    items.append({"text": ITEMS[8], "tags": ["trains"]})
    with Client(world.url, world.key) as client:
        out = client.remember_many(items)  # type: ignore[arg-type]
        assert [type(o).__name__ for o in out] == ["WriteResult"] * 7 + [
            "SecretDetected",
            "WriteResult",
        ]
        assert isinstance(out[7], SecretDetected) and out[7].code == "secret_detected"
        assert isinstance(out[8], WriteResult) and out[8].memory.tags == ("trains",)
        again = client.remember_many([ITEMS[0]], scope="agent")
        assert isinstance(again[0], WriteResult) and not again[0].created
        assert again[0].memory.id == out[0].memory.id  # type: ignore[union-attr]
        with pytest.raises(PayloadTooLarge) as too_many:
            client.remember_many(["x"] * (MAX_ITEMS + 1))
        assert too_many.value.code == "too_many_items"
    headers = {"Authorization": f"Bearer {world.key}", "Content-Type": "application/json"}
    url = f"{world.url}/v1/memories/batch"
    raw = httpx.post(url, json={"items": items}, headers=headers, timeout=30)
    assert raw.status_code == 200
    slot = raw.json()["results"][7]
    assert slot["index"] == 7 and slot["status"] == 422
    assert slot["error"]["code"] == "secret_detected" and TOKEN not in raw.text
    for body, status in (
        ('{"items": "one text"}', 422),
        ('{"items": ["ok", "lone \\ud800 surrogate"]}', 422),
        ('{"items": ["ok"], "tenant_id": "t2"}', 422),
        ('{"items": [' + "[" * 200 + "]" * 200 + "]}", 422),
    ):
        answer = httpx.post(url, content=body, headers=headers, timeout=30)
        assert answer.status_code == status, (body[:40], answer.text[:200])
        assert answer.json()["error"]["code"]

    async def main() -> None:
        async with AsyncClient(world.url, world.key) as client:
            got = await client.remember_many(["An async bulk write", {"text": f"k {TOKEN}"}])
            assert isinstance(got[0], WriteResult) and got[0].created
            assert isinstance(got[1], SecretDetected)
        async with connect(f"{world.url}/mcp", world.key) as mcp:
            done = await mcp.call_tool(
                "memory_remember_many",
                {"items": ["An MCP bulk write", f"secret {TOKEN}"], "scope": "agent"},
            )
            assert not done.is_error and done.structured_content is not None
            first, second = done.structured_content["results"]
            assert first["created"] and first["id"] and first["status"] == 201
            assert second["error"]["code"] == "secret_detected"
            assert TOKEN not in str(done.structured_content)

    anyio.run(main)
