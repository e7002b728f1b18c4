"""Model-written article bodies over HTTP and MCP (issue 25, GRAD-1 with LIFE-5): a server set
up with a chat model (``extractor = model``, a local chat-completions server) answers a
graduation with a ``candidate_id``; reviewers list and judge candidates
(``/v1/review/articles``, MCP ``knowledge_review_queue`` / ``knowledge_review``); the agent
whose memory it was gets 403; the MCP text is a defanged data block."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from quipu.article_candidates import ModelBodyWriter
from quipu.composition import load_settings
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.governance import GovernanceService
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.http.server import build_server
from quipu.surfaces.mcp import create_mcp_server
from tests.support.article_model_server import ArticleModelServer

TEXT = "The staging deploy needs the VPN switched on before make deploy-staging."


@pytest.fixture(scope="module")
def model() -> Iterator[ArticleModelServer]:
    server = ArticleModelServer()
    yield server
    server.close()


def test_grad_001_http_graduate_then_review_the_model_body(
    tmp_path: Path, local_embedder: LocalEmbedder, model: ArticleModelServer
) -> None:
    model.mode = "injection"
    s = load_settings(
        {
            "database": str(tmp_path / "k.db"),
            "auth": True,
            "extractor": "model",
            "extractor_base_url": model.url,
            "extractor_model": "writer-http",
        },
        environ={},
    )
    app, runtime = build_server(s, local_embedder)
    access = app.state.access
    access.create_tenant("t")
    _, admin = access.create_key("t", "admin", agent_id="ops")
    _, agent = access.create_key("t", "agent", agent_id="a", user_id="ua")
    with TestClient(app, raise_server_exceptions=False) as client:

        def call(method: str, key: str, path: str, body: Any = None) -> Any:
            headers = {"authorization": f"Bearer {key}"}
            if isinstance(body, str):  # raw JSON text (escapes no encoder would write)
                headers["content-type"] = "application/json"
                return client.request(method, path, content=body.encode(), headers=headers)
            return client.request(method, path, json=body, headers=headers)

        mid = call("POST", agent, "/v1/memories", {"text": TEXT}).json()["memory"]["id"]
        done = call("POST", agent, f"/v1/memories/{mid}/graduate", {})
        assert done.status_code == 201, done.text
        cid, aid = done.json()["candidate_id"], done.json()["article"]["id"]
        assert cid and call("GET", agent, f"/v1/knowledge/{aid}").json()["body"] == TEXT
        denied = call("GET", agent, "/v1/review/articles")
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "review_required"
        page = call("GET", admin, "/v1/review/articles").json()
        (item,) = page["items"]
        assert item["id"] == cid and item["injection_suspected"] and item["model"] == "writer-http"
        assert "<system>" not in item["body"]
        for body in (
            {"decision": "affirm"},  # no reason
            {"decision": "publish", "reason": "x"},
            {"decision": "affirm", "reason": "x", "tenant_id": "u"},  # no identity in a body
            '{"decision": "affirm", "reason": "bad\\ud800"}',  # a lone surrogate, raw JSON
        ):
            bad = call("POST", admin, f"/v1/review/articles/{cid}", body)
            assert bad.status_code == 422, (body, bad.text)
        assert call("POST", admin, "/v1/review/articles/nope%2F..", {}).status_code in (404, 422)
        self_judge = call(
            "POST", agent, f"/v1/review/articles/{cid}", {"decision": "affirm", "reason": "x"}
        )
        assert self_judge.status_code == 403
        ok = call(
            "POST", admin, f"/v1/review/articles/{cid}", {"decision": "affirm", "reason": "ok"}
        )
        assert ok.status_code == 200 and ok.json()["candidate"]["status"] == "affirmed"
        assert call("GET", agent, f"/v1/knowledge/{aid}").json()["body"] == item["body"]
        again = call(
            "POST", admin, f"/v1/review/articles/{cid}", {"decision": "reject", "reason": "x"}
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "not_in_review"
        bad_status = call("GET", admin, "/v1/review/articles?status=erased")
        assert bad_status.status_code == 422
    runtime.close()


def test_grad_001_mcp_review_tools(
    tmp_path: Path, local_embedder: LocalEmbedder, model: ArticleModelServer
) -> None:
    model.mode = "ok"
    service = MemoryService(SQLiteStore(tmp_path / "m.db"), local_embedder, Limits())
    service.body_writer = ModelBodyWriter(base_url=model.url, model="writer-mcp", timeout=2.0)
    agent = Principal("t1", "key-a", Role.AGENT, agent_id="a", grants=frozenset({"memory:review"}))
    admin = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
    who = [agent]
    resolve: Callable[[Any], Principal] = lambda _ctx: who[0]  # noqa: E731
    server = create_mcp_server(service, resolve, governance=GovernanceService(service))

    async def main() -> None:
        async with Client(server) as client:
            mid = service.remember(agent, TEXT).memory.id
            done = await client.call_tool("memory_graduate", {"memory_id": mid})
            cid = done.structured_content["candidate_id"]
            assert cid
            queue = await client.call_tool("knowledge_review_queue", {})
            text = "".join(getattr(b, "text", "") for b in queue.content)
            assert not queue.is_error and text.count("</knowledge>") == 1 and cid in text
            own = await client.call_tool(
                "knowledge_review", {"candidate_id": cid, "decision": "affirm", "reason": "mine"}
            )
            own_text = "".join(getattr(b, "text", "") for b in own.content)
            assert own.is_error and "self_review" in own_text
            who[0] = admin
            judged = await client.call_tool(
                "knowledge_review", {"candidate_id": cid, "decision": "reject", "reason": "thin"}
            )
            assert judged.structured_content["candidate"]["status"] == "rejected"

    anyio.run(main)
    service.close()
    service.store.close()


def test_grad_001_the_three_clients_list_and_judge_candidates(
    tmp_path: Path, local_embedder: LocalEmbedder, model: ArticleModelServer
) -> None:
    """``quipu.Client`` and ``quipu.AsyncClient`` over a real socket, and the embedded
    ``quipu.open``: the same two methods, the same answers and codes."""
    import quipu
    from quipu.errors import Forbidden
    from tests.support.live_server import LiveServer

    model.mode = "ok"
    with_model = {
        "extractor": "model",
        "extractor_base_url": model.url,
        "extractor_model": "writer-client",
    }
    s = load_settings({"database": str(tmp_path / "c.db"), "auth": True, **with_model}, environ={})
    app, runtime = build_server(s, local_embedder)
    access = app.state.access
    access.create_tenant("t")
    _, admin = access.create_key("t", "admin", agent_id="ops")
    _, agent = access.create_key("t", "agent", agent_id="a", user_id="ua")
    server = LiveServer(app)
    try:
        with quipu.Client(server.url, agent) as mine, quipu.Client(server.url, admin) as rev:
            made = mine.remember(TEXT)
            made_id = mine.graduate(made.id).candidate_id
            assert made_id is not None
            cid = made_id
            assert [c["id"] for c in rev.article_candidates()["items"]] == [cid]
            with pytest.raises(Forbidden):
                mine.article_candidates()

            async def judge() -> dict[str, Any]:
                async with quipu.AsyncClient(server.url, admin) as later:
                    return await later.review_article(cid, "reject", reason="thin")

            judged = anyio.run(judge)
            assert judged["candidate"]["status"] == "rejected"
            assert rev.article_candidates(status="rejected")["items"][0]["id"] == cid
    finally:
        server.close()
        runtime.close()
    with quipu.open(tmp_path / "lib.db", embedder=local_embedder, **with_model) as lib:
        memory = lib.remember(TEXT)
        lib_cid = lib.graduate(memory.id).candidate_id
        assert lib_cid and lib.article_candidates()["items"][0]["model"] == "writer-client"
        with pytest.raises(Forbidden) as own:  # the one local principal asked the model
            lib.review_article(lib_cid, "affirm", reason="mine")
        assert own.value.code == "self_review"
