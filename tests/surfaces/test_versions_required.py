"""LIFE-2 on the surfaces (issue 20 defect 15): over HTTP and MCP the current version changes
only when the caller names the version it replaces; the library keeps the choice (a trusted
local caller). Forget's reason travels in a body, and no query string reaches the access log
(defect 4)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from quipu.composition import load_settings, local_principal
from quipu.core.limits import Limits
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver
from quipu.surfaces.http.logs import WithoutQuery, configure_logging
from quipu.surfaces.mcp import create_mcp_server, fixed_principal


@pytest.fixture
def api(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[TestClient]:
    settings = load_settings({"database": str(tmp_path / "v.db")}, environ={})
    service = MemoryService(SQLiteStore(settings.database), local_embedder, Limits())
    app = create_app(service, local_resolver(local_principal(settings, "http")))
    with TestClient(app) as client:
        yield client
    service.store.close()


def _remember(api: TestClient, text: str) -> str:
    response = api.post("/v1/memories", json={"text": text})
    assert response.status_code == 201, response.text
    return str(response.json()["memory"]["id"])


def test_life_002_http_revise_and_status_need_the_version_they_replace(api: TestClient) -> None:
    mid = _remember(api, "Dana prefers window seats")
    for body in ({"text": "Dana prefers aisle seats"}, {"status": "archived"}):
        missing = api.patch(f"/v1/memories/{mid}", json=body)
        assert missing.status_code == 428, missing.text
        assert missing.json()["error"]["code"] == "expected_version_required"
    stale = api.patch(f"/v1/memories/{mid}", json={"text": "x is y", "expected_version": 7})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "version_conflict"
    ok = api.patch(f"/v1/memories/{mid}", json={"text": "Dana likes aisles", "expected_version": 1})
    assert ok.status_code == 200 and ok.json()["version"] == 2
    assert len(api.get(f"/v1/memories/{mid}/history").json()["versions"]) == 2


def test_life_002_http_supersede_needs_the_version_it_replaces(api: TestClient) -> None:
    old, new = _remember(api, "Dana lives in Porto"), _remember(api, "Dana lives in Lisbon")
    missing = api.post(f"/v1/memories/{old}/supersede", json={"new_id": new})
    assert missing.status_code == 428
    stale = api.post(f"/v1/memories/{old}/supersede", json={"new_id": new, "expected_version": 2})
    assert stale.status_code == 409
    done = api.post(f"/v1/memories/{old}/supersede", json={"new_id": new, "expected_version": 1})
    assert done.status_code == 200 and done.json()["status"] == "superseded"


def test_safe_001_forget_takes_its_reason_in_a_body(api: TestClient) -> None:
    mid = _remember(api, "Dana prefers window seats")
    gone = api.post(f"/v1/memories/{mid}/forget", json={"reason": "the user asked"})
    assert gone.status_code == 200 and gone.json()["status"] == "unavailable"
    assert gone.json()["reason"] == "the user asked"


def test_safe_001_access_log_lines_never_carry_a_query_string() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "DELETE", "/v1/memories/abc?reason=my+pin+is+1234", "1.1", 200),
        None,
    )
    assert WithoutQuery().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "DELETE /v1/memories/abc?… HTTP/1.1" 200'


def test_safe_005_configured_logging_keeps_rich_off_the_root_logger(tmp_path: Path) -> None:
    """The MCP SDK calls logging.basicConfig with a Rich handler; once quipu configured the
    root logger first, that adds nothing (a Rich traceback stalls the event loop)."""
    root = logging.getLogger()
    saved = root.handlers[:]
    try:
        root.handlers = []
        configure_logging("info")
        service = MemoryService(SQLiteStore(tmp_path / "r.db"), None, Limits())
        create_mcp_server(service, fixed_principal(local_principal(load_settings({}, environ={}))))
        assert root.handlers and not any("Rich" in type(h).__name__ for h in root.handlers)
        service.store.close()
    finally:
        root.handlers = saved


def test_life_002_mcp_revise_and_supersede_require_the_version(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    service = MemoryService(SQLiteStore(tmp_path / "m.db"), local_embedder, Limits())
    who = local_principal(load_settings({}, environ={}), "mcp")
    server = create_mcp_server(service, fixed_principal(who))
    old = service.remember(who, "Dana lives in Porto").memory
    new = service.remember(who, "Dana lives in Lisbon").memory

    async def main() -> None:
        async with Client(server) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            assert "expected_version" in tools["memory_revise"]["required"]
            assert "expected_version" in tools["memory_supersede"]["required"]
            result = await client.call_tool("memory_revise", {"memory_id": old.id, "text": "x"})
            assert result.is_error
            text = "".join(getattr(b, "text", "") for b in result.content)
            assert text.startswith("invalid_request"), text
            done = await client.call_tool(
                "memory_supersede", {"old_id": old.id, "new_id": new.id, "expected_version": 1}
            )
            assert not done.is_error

    anyio.run(main)
    assert service.get(who, new.id).status.value == "active"
    service.store.close()
