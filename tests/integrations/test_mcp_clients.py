"""The MCP client configurations of docs/integrations.md work as written (issue 27, API-3):
each starts the server the way the configuration does (``quipu mcp --db PATH`` over stdio, a
``quipu serve --auth`` process for streamable HTTP with a bearer token) and calls tools with
the real ``mcp`` client. The servers run without the embedding model (``QUIPU_EMBEDDER=none``,
full-text recall) to keep the suite fast; the configurations do not depend on it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from quipu.auth.access import Access
from quipu.storage.sqlite.store import SQLiteStore
from tests.integrations.test_integrations_docs import run, snippets

BIN = Path(sys.executable).parent
QUIPU = BIN / "quipu"
FAST = {"QUIPU_EMBEDDER": "none"}


def configs(heading: str) -> list[dict[str, Any]]:
    """The ``quipu`` entry of each JSON configuration under a ``### heading``."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    part = text.split(f"### {heading}", 1)[1].split("\n### ", 1)[0]
    blocks = part.split("```json\n")[1:]
    return [json.loads(block.split("```", 1)[0])["mcpServers"]["quipu"] for block in blocks]


def local(entry: dict[str, Any], db: Path) -> StdioServerParameters:
    """A stdio entry with its placeholder paths made real."""
    assert entry["command"] == "/ABSOLUTE/PATH/TO/.venv/bin/quipu"
    args = [db.as_posix() if a == "/ABSOLUTE/PATH/TO/memory.db" else a for a in entry["args"]]
    assert args == ["mcp", "--db", db.as_posix()]
    return StdioServerParameters(command=str(QUIPU), args=args, env={**os.environ, **FAST})


async def remember_and_recall(client: Client, text: str, query: str) -> str:
    wrote = await client.call_tool("memory_remember", {"text": text, "scope": "user"})
    assert not wrote.is_error, wrote
    found = await client.call_tool("memory_recall", {"query": query, "scope": "user"})
    assert not found.is_error and found.structured_content is None  # text only (issue 27)
    return top_hit(found.content[0].text)


def top_hit(answer: str) -> str:
    """The text of the first hit of memory_recall's line answer: a header line, then the hits
    as ``- `` lines of the data block (SAFE-2)."""
    first = next(line for line in answer.split("\n") if line.startswith("- "))
    return first.split(": ", 1)[1]


@pytest.mark.parametrize("heading", ["Claude Desktop", "Cursor"])
def test_api_003_stdio_configurations_start_quipu_mcp(heading: str, tmp_path: Path) -> None:
    entry = configs(heading)[0]
    params = local(entry, tmp_path / "memory.db")

    async def main() -> str:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return await remember_and_recall(client, "The user's cat is Miso", "cat")

    assert anyio.run(main) == "The user's cat is Miso"
    assert (tmp_path / "memory.db").exists()


@dataclass
class Served:
    port: int
    token: str
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`quipu serve --auth` as its own process, with an agent key made on its store."""
    folder = tmp_path_factory.mktemp("serve")
    db = folder / "shared.db"
    store = SQLiteStore(db)
    access = Access(store)
    access.create_tenant("acme")
    _, token = access.create_key("acme", "agent", agent_id="helper", user_id="u-1")
    store.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (folder / "serve.log").open("w")
    process = subprocess.Popen(
        [str(QUIPU), "serve", "--auth", "--db", str(db), "--port", str(port), "--workers", "1"],
        env={**os.environ, **FAST, "QUIPU_WORKER_EMBEDDED": "false"},
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=folder,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, (folder / "serve.log").read_text()
            assert time.monotonic() < deadline, "quipu serve did not start"
            time.sleep(0.1)
        yield Served(port, token, process)
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def test_api_003_cursor_http_configuration_reaches_quipu_serve(served: Served) -> None:
    entry = configs("Cursor")[1]
    assert entry["url"] == "http://127.0.0.1:8750/mcp"
    url = entry["url"].replace("8750", str(served.port))
    headers = {
        name: value.replace("<API key or run token>", served.token)
        for name, value in entry["headers"].items()
    }

    async def main(sent: dict[str, str]) -> str:
        async with (
            httpx2.AsyncClient(headers=sent, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await remember_and_recall(client, "The user flies from Lisbon", "Lisbon")

    assert anyio.run(main, headers) == "The user flies from Lisbon"
    # The header is what authenticates: without it the endpoint refuses.
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    refused = httpx.post(url, json=ping, headers={"Accept": "application/json, text/event-stream"})
    assert refused.status_code == 401


def test_api_003_python_client_examples_run(
    served: Served,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (stdio_code, http_code) = snippets("MCP clients")
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    run(stdio_code, tmp_path, monkeypatch)
    assert top_hit(capsys.readouterr().out.strip()) == "The user's cat is Miso"
    assert (tmp_path / "memory.db").exists()

    monkeypatch.setenv("QUIPU_TOKEN", served.token)
    run(http_code.replace("127.0.0.1:8750", f"127.0.0.1:{served.port}"), tmp_path, monkeypatch)
    assert top_hit(capsys.readouterr().out.strip()) == "Deploys happen on Tuesdays"
