"""The knowledge and merged-recall tools over MCP's streamable HTTP transport (issue 25, API-3;
stdio is covered in test_knowledge_surfaces): a real uvicorn server, the SDK's HTTP client and a
bearer token per principal. Each tool answers as over stdio: the gate's verdict, the search rows
without the body, recall_context with its ledger and the session's shown set, referenced with
its bounds (50 surfaced ids accepted, a 51st refused, one not surfaced fails the whole call),
graduation once, and the codes of the library for bad input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Unauthorized
from quipu.governance import GovernanceService
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.mcp import mount_mcp
from tests.support.live_server import LiveServer

KEYS = {
    "token-admin": Principal("t1", "key-admin", Role.ADMIN, agent_id="ops"),
    "token-alice": Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-a"),
}


def _who(token: str) -> Principal:
    if token not in KEYS:
        raise Unauthorized("unknown credential")
    return KEYS[token]


@pytest.fixture
def served(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[tuple[str, MemoryService]]:
    service = MemoryService(SQLiteStore(tmp_path / "mcp.db"), local_embedder, Limits())
    app = FastAPI()
    mount_mcp(app, service, _who, governance=GovernanceService(service))
    server = LiveServer(app)
    yield f"{server.url}/mcp", service
    server.close()
    service.close()
    service.store.close()


def _text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


def test_api_003_knowledge_tools_over_streamable_http(
    served: tuple[str, MemoryService],
) -> None:
    url, service = served
    alice = KEYS["token-alice"]
    notes = [
        service.remember(alice, f"Deploy note {n}: staging step {n} needs the VPN.").memory.id
        for n in range(50)
    ]

    async def main() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer token-admin"}) as h_admin,
            httpx2.AsyncClient(headers={"Authorization": "Bearer token-alice"}) as h_alice,
            Client(streamable_http_client(url, http_client=h_admin)) as admin,
            Client(streamable_http_client(url, http_client=h_alice)) as agent,
        ):
            body = "Run make deploy-staging from the release branch with the VPN on."
            made = await admin.call_tool("knowledge_create", {"title": "Deploys", "body": body})
            assert made.structured_content["verdict"] == "created", _text(made)
            aid = made.structured_content["article"]["id"]
            dup = await admin.call_tool("knowledge_create", {"title": "Again", "body": body})
            assert dup.structured_content["verdict"] == "deduplicated"
            rows = await agent.call_tool("knowledge_search", {"query": "deploy staging"})
            assert [set(r) for r in rows.structured_content["results"]] == [
                {"id", "title", "category", "tags", "score", "snippet"}
            ]
            listed = await agent.call_tool("knowledge_list", {})
            assert [a["id"] for a in listed.structured_content["items"]] == [aid]
            got = await agent.call_tool("knowledge_get", {"article_id": aid})
            assert got.structured_content["body"] == body
            changed = await admin.call_tool(
                "knowledge_update", {"article_id": aid, "expected_version": 1, "tags": ["ops"]}
            )
            assert changed.structured_content["article"]["version"] == 2
            ask = {"query": "deploy staging VPN", "k": 50, "budget_tokens": 100_000}
            out = await agent.call_tool("recall_context", {**ask, "session_id": "s-http"})
            data = out.structured_content
            assert not out.is_error and len(data["results"]) == 50, _text(out)
            assert {"rank", "selection_reason", "tokens_estimate"} <= set(data["results"][0])
            assert data["text"].startswith("<context>")
            rid, shown = data["meta"]["recall_id"], [r["id"] for r in data["results"]]
            again = await agent.call_tool("recall_context", {**ask, "session_id": "s-http"})
            assert aid in shown  # shown to this session; its pool holds nothing else: it comes back
            assert again.structured_content["meta"]["diversity"]["readmitted_already_seen"] == 1
            too_many = await agent.call_tool(
                "recall_referenced", {"recall_id": rid, "ids": [*shown, shown[0]]}
            )
            assert too_many.is_error and "too_many_ids" in _text(too_many)
            foreign = [*shown[:49], "0" * 32]
            refused = await agent.call_tool("recall_referenced", {"recall_id": rid, "ids": foreign})
            assert refused.is_error and "not_surfaced" in _text(refused)
            assert service.store.recall_references("t1", rid) == []  # nothing written
            ok = await agent.call_tool("recall_referenced", {"recall_id": rid, "ids": shown})
            assert ok.structured_content["accepted"] == 50, _text(ok)
            stolen = await admin.call_tool(
                "recall_referenced", {"recall_id": rid, "ids": shown[:1]}
            )
            assert stolen.is_error and "not_surfaced" in _text(stolen)
            long = await agent.call_tool("recall_context", {"query": "x", "session_id": "s" * 201})
            assert long.is_error and "invalid_session_id" in _text(long)
            grad = await agent.call_tool("memory_graduate", {"memory_id": notes[0]})
            assert grad.structured_content["verdict"] in ("created", "gated_to_draft")
            twice = await agent.call_tool("memory_graduate", {"memory_id": notes[0]})
            assert twice.structured_content["verdict"] == "deduplicated"  # once per memory
            wide = await agent.call_tool(
                "memory_graduate", {"memory_id": notes[0], "re_scope": "tenant"}
            )
            assert wide.is_error and "scope_forbidden" in _text(wide)  # no tenant:write grant
            bad = await agent.call_tool("memory_graduate", {"memory_id": "../x"})
            assert bad.is_error and "invalid_memory_id" in _text(bad)

    anyio.run(main)
