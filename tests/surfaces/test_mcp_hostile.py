"""Hostile JSON-RPC to the MCP server (issue 20 defect 13; SAFE-5, API-3): over stdio (the real
``quipu mcp`` process, spoken to over its pipes) and over streamable HTTP (a real uvicorn
server), a message with a lone surrogate, a NUL or deep arguments gets a JSON-RPC error that
carries its id, never silence, and nothing is stored."""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.mcp import mount_mcp
from tests.support.live_server import LiveServer
from tests.support.poison import store_raw

#: A hang guard for each answer, not a speed assertion.
WAIT_S = 30.0
ALICE = Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def _deep(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def _call(request_id: int, tool: str, arguments: str) -> str:
    """A ``tools/call`` line with ``arguments`` spliced in as raw JSON text."""
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
        f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}'
    )


#: (raw line, expected id, expected JSON-RPC code, expected ``data.code``, ``data.field``).
HOSTILE: list[tuple[str, int | None, int, str | None, str | None]] = [
    (
        _call(2, "memory_remember", '{"text": "hi \\ud800 there"}'),
        2,
        -32602,
        "invalid_text",
        "params.arguments.text",
    ),
    (
        _call(3, "memory_remember", '{"text": "deep one", "metadata": ' + _deep(300) + "}"),
        3,
        -32602,
        "json_too_deep",
        None,
    ),
    (
        _call(4, "memory_remember", '{"text": "ok", "tags": ["a", "\\u0000"]}'),
        4,
        -32602,
        "invalid_text",
        "params.arguments.tags.1",
    ),
    (
        _call(5, "memory_recall", '{"query": "where", "tags": ["\\udc00"]}'),
        5,
        -32602,
        "invalid_text",
        "params.arguments.tags.0",
    ),
    (
        _call(6, "memory_remember", '{"text": "x", "metadata": {"\\ud800": 1}}'),
        6,
        -32602,
        "invalid_text",
        "params.arguments.metadata.\\ud800",
    ),
    # Too deep even to parse: the id cannot be read, so it is null (JSON-RPC 2.0).
    (
        _call(7, "memory_remember", '{"text": "x", "metadata": ' + _deep(50_000) + "}"),
        None,
        -32600,
        "json_too_deep",
        "",
    ),
]


# -- stdio ---------------------------------------------------------------------------------------
class Stdio:
    """``quipu mcp --db PATH`` as a client launches it, spoken to line by line."""

    def __init__(self, db: Path, cwd: Path) -> None:
        quipu = Path(sys.executable).with_name("quipu")
        self.stderr = (cwd / "stderr.log").open("w")
        self.proc = subprocess.Popen(
            [str(quipu), "mcp", "--db", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, "QUIPU_EMBEDDER": "none"},
            cwd=cwd,
        )
        self.buffer = b""

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        # surrogatepass: the raw line may hold what JSON text must never hold.
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + WAIT_S
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            assert ready, "no answer: the server stayed silent"
            chunk = os.read(self.proc.stdout.fileno(), 65_536)
            assert chunk, "the server exited"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(message))
        return self.answer()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self.stderr.close()


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stdio]:
    """One process for the module: starting one costs seconds (imports, migrations)."""
    tmp_path = tmp_path_factory.mktemp("stdio")
    server = Stdio(tmp_path / "stdio.db", tmp_path)
    initialized = server.request(INITIALIZE)
    assert initialized["id"] == 0 and "result" in initialized
    server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield server
    server.close()


def _tool_result(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]  # type: ignore[no-any-return]


def _listed(stdio: Stdio, request_id: int) -> list[dict[str, Any]]:
    answer = stdio.request(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "memory_list", "arguments": {}},
        }
    )
    return _tool_result(answer)["items"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("line", "request_id", "code", "data_code", "field"), HOSTILE)
def test_api_003_issue20_d13_stdio_answers_hostile_calls_with_a_jsonrpc_error(
    stdio: Stdio,
    line: str,
    request_id: int | None,
    code: int,
    data_code: str | None,
    field: str | None,
) -> None:
    before = _listed(stdio, 99)
    stdio.send(line)
    answer = stdio.answer()
    assert answer["id"] == request_id and "result" not in answer, answer
    error = answer["error"]
    assert error["code"] == code and error["message"].startswith(f"{data_code}: ")
    assert error["data"]["code"] == data_code
    if field is not None:
        assert error["data"]["field"] == field
    # The server is still there, and nothing was stored.
    assert _listed(stdio, 100) == before


def test_api_003_issue20_d13_stdio_answers_every_unreadable_line(stdio: Stdio) -> None:
    """Lines the SDK cannot read at all are answered too (JSON-RPC 2.0: parse error and
    invalid request, with the id when it can be read); a blank line is skipped."""
    stdio.send("")
    stdio.send("{not json")
    assert stdio.answer() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    stdio.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": "x"}))
    invalid = stdio.answer()
    assert invalid["id"] == 9 and invalid["error"]["code"] == -32600
    stored = stdio.request(
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "memory_remember", "arguments": {"text": "The office cat is Miso"}},
        }
    )
    assert _tool_result(stored)["created"] is True
    assert "The office cat is Miso" in [m["text"] for m in _listed(stdio, 11)]


# -- streamable HTTP -----------------------------------------------------------------------------
@pytest.fixture
def service(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[MemoryService]:
    svc = MemoryService(SQLiteStore(tmp_path / "mcp.db"), local_embedder, Limits())
    yield svc
    svc.store.close()


@pytest.fixture
def mcp_url(service: MemoryService) -> Iterator[str]:
    app = FastAPI()
    mount_mcp(app, service, lambda token: ALICE if token == "token-alice" else _refuse())
    server = LiveServer(app)
    yield f"{server.url}/mcp"
    server.close()


def _refuse() -> Principal:
    from quipu.errors import Unauthorized

    raise Unauthorized("unknown credential")


HEADERS = {
    "Authorization": "Bearer token-alice",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}


@pytest.mark.parametrize(("line", "request_id", "code", "data_code", "field"), HOSTILE)
def test_api_003_issue20_d13_http_answers_hostile_calls_with_a_jsonrpc_error(
    mcp_url: str,
    service: MemoryService,
    line: str,
    request_id: int | None,
    code: int,
    data_code: str | None,
    field: str | None,
) -> None:
    r = httpx.post(mcp_url, content=line.encode("utf-8", "surrogatepass"), headers=HEADERS)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["id"] == request_id and answer["error"]["code"] == code, answer
    assert answer["error"]["data"]["code"] == data_code
    if field is not None:
        assert answer["error"]["data"]["field"] == field
    assert service.list(ALICE).items == []


def test_safe_005_issue20_a_stored_lone_surrogate_never_breaks_a_tool_result(
    mcp_url: str, service: MemoryService
) -> None:
    """A row holding lone surrogates, written straight into the store: memory_get and
    memory_list answer over HTTP with U+FFFD in their place."""
    good = service.remember(ALICE, "The office cat is called Miso").memory
    poisoned = dataclasses.replace(
        good,
        id="poisoned000000000000000000000002",
        text="The office dog is called Rex",
        tags=("pets\ud800",),
        metadata={"k\udfff": "v"},
        content_hash="1" * 64,
    )
    store_raw(service.store, poisoned)

    async def main() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer token-alice"}) as http,
            Client(streamable_http_client(mcp_url, http_client=http)) as client,
        ):
            got = await client.call_tool("memory_get", {"memory_id": poisoned.id})
            assert not got.is_error and got.structured_content is not None
            assert got.structured_content["tags"] == ["pets\ufffd"]
            assert got.structured_content["metadata"] == {"k\ufffd": "v"}
            listed = await client.call_tool("memory_list", {})
            assert not listed.is_error and listed.structured_content is not None
            assert len(listed.structured_content["items"]) == 2

    anyio.run(main)
