"""The HTTP API in local mode (API-2): routes, the error envelope, stable codes, OpenAPI."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from quipu.composition import load_settings, local_principal
from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver
from quipu.surfaces.http.deps import PrincipalResolver


@pytest.fixture
def client(tmp_path: Path, local_embedder) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    settings = load_settings({"database": str(tmp_path / "h.db")}, environ={})
    service = MemoryService(SQLiteStore(settings.database), local_embedder, Limits())
    principal = local_principal(settings, "http")
    app = create_app(service, local_resolver(principal), max_body_bytes=64_000)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c
    service.store.close()


def test_api_002_remember_get_patch_history_delete(client: TestClient) -> None:
    r = client.post(
        "/v1/memories",
        json={
            "text": "Dana prefers window seats",
            "kind": "preference",
            "scope": "user",
            "tags": ["travel"],
        },
    )
    assert r.status_code == 201 and r.json()["created"] is True
    memory = r.json()["memory"]
    assert memory["provenance"]["surface"] == "http"
    again = client.post("/v1/memories", json={"text": "Dana prefers window seats", "scope": "user"})
    assert again.status_code == 200 and again.json()["created"] is False
    mid = memory["id"]
    assert client.get(f"/v1/memories/{mid}").json()["text"] == "Dana prefers window seats"
    patched = client.patch(
        f"/v1/memories/{mid}",
        json={"text": "Dana prefers aisle seats", "expected_version": 1, "reason": "update"},
    )
    assert patched.status_code == 200 and patched.json()["version"] == 2
    stale = client.patch(f"/v1/memories/{mid}", json={"text": "exit row", "expected_version": 1})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "version_conflict"
    archived = client.patch(
        f"/v1/memories/{mid}", json={"status": "archived", "expected_version": 2}
    )
    assert archived.json()["status"] == "archived"
    gone = client.delete(f"/v1/memories/{mid}", params={"reason": "user asked"})
    assert gone.status_code == 200 and gone.json()["status"] == "unavailable"
    assert client.get(f"/v1/memories/{mid}").status_code == 404
    versions = client.get(f"/v1/memories/{mid}/history").json()["versions"]
    assert [v["status"] for v in versions] == ["active", "active", "archived", "unavailable"]


def test_api_002_recall_list_and_supersede(client: TestClient) -> None:
    ids = [
        client.post("/v1/memories", json={"text": t}).json()["memory"]["id"]
        for t in ("Jonas lives in Berlin", "Jonas moved to Lisbon", "The printer is on floor 3")
    ]
    r = client.post("/v1/recall", json={"query": "where does Jonas live?", "k": 2})
    body = r.json()
    assert r.status_code == 200 and len(body["results"]) == 2
    assert body["meta"]["fallback"] is False and "timings" in body["meta"]
    s = client.post(
        f"/v1/memories/{ids[0]}/supersede",
        json={"new_id": ids[1], "reason": "moved", "expected_version": 1},
    )
    assert s.json()["status"] == "superseded"
    listed = client.get("/v1/memories", params={"limit": 1}).json()
    assert len(listed["items"]) == 1 and listed["next_cursor"]
    rest = client.get("/v1/memories", params={"limit": 5, "cursor": listed["next_cursor"]}).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None
    assert {m["id"] for m in listed["items"] + rest["items"]} == {ids[1], ids[2]}


@pytest.mark.parametrize(
    ("method", "path", "payload", "status", "code"),
    [
        ("post", "/v1/recall", {"query": "   "}, 422, "invalid_query"),
        ("post", "/v1/recall", {"query": "x" * 501}, 422, "query_too_long"),
        ("post", "/v1/recall", {"query": 5}, 422, "invalid_query"),
        ("post", "/v1/recall", {"query": "ok", "k": 0}, 422, "invalid_k"),
        ("post", "/v1/memories", {"text": ""}, 422, "invalid_text"),
        ("post", "/v1/memories", {"text": "hi", "tenant_id": "t2"}, 422, "invalid_request"),
        ("post", "/v1/memories", {"text": "hi", "owner": "someone"}, 422, "invalid_request"),
        ("post", "/v1/memories", {"text": "key AKIAIOSFODNN7EXAMPLE"}, 422, "secret_detected"),
        (
            "post",
            "/v1/memories",
            {"text": "hi", "scope": "user", "kind": "bogus"},
            422,
            "invalid_kind",
        ),
        ("get", "/v1/memories/does-not-exist", None, 404, "not_found"),
        ("get", "/v1/memories?cursor=%%%", None, 422, "invalid_cursor"),
        ("get", "/v1/memories?limit=100000", None, 422, "invalid_limit"),
        ("get", "/v1/nope", None, 404, "not_found"),
    ],
)
def test_api_002_errors_use_the_envelope(
    client: TestClient, method: str, path: str, payload: object, status: int, code: str
) -> None:
    r = client.request(method.upper(), path, json=payload)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict)


def test_safe_005_malformed_json_and_oversized_bodies(client: TestClient) -> None:
    r = client.post(
        "/v1/memories", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    big = client.post("/v1/memories", json={"text": "x" * 70_000})
    assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"


def test_api_002_openapi_and_health(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/v1/memories", "/v1/recall", "/v1/memories/{memory_id}", "/healthz"} <= set(
        spec["paths"]
    )
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["backend"] == "sqlite"


def test_session_001_http_turns_promote_and_jobs(tmp_path: Path, local_embedder) -> None:  # type: ignore[no-untyped-def]
    from quipu.surfaces.http.server import build_server

    settings = load_settings({"database": str(tmp_path / "s.db")}, environ={})
    app, runtime = build_server(settings, local_embedder)
    with TestClient(app, raise_server_exceptions=False) as c:
        for role, text in [
            ("user", "I live in Porto and I prefer window seats."),
            ("assistant", "Noted!"),
        ]:
            r = c.post("/v1/sessions/chat-7/turns", json={"role": role, "content": text})
            assert r.status_code == 201
        turns = c.get("/v1/sessions/chat-7/turns").json()["turns"]
        assert [t["seq"] for t in turns] == [1, 2]
        bad = c.post("/v1/sessions/chat-7/turns", json={"role": "god", "content": "x"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_role"
        queued = c.post("/v1/sessions/chat-7/promote")
        assert queued.status_code == 202 and queued.json()["job"]["status"] == "queued"
        assert c.post("/v1/sessions/chat-7/promote").status_code == 200
        runtime.worker.drain()
        jobs = c.get("/v1/jobs").json()["items"]
        assert jobs[0]["status"] == "succeeded" and jobs[0]["result"]["created"] >= 2
        recalled = c.post(
            "/v1/recall", json={"query": "where does the user live", "scope": "agent_user"}
        ).json()
        assert "Porto" in recalled["results"][0]["text"]
        assert (
            c.post(f"/v1/jobs/{jobs[0]['job_id']}/retry").json()["error"]["code"]
            == "job_not_retryable"
        )
        assert c.post("/v1/jobs/nope/cancel").status_code == 404
    runtime.close()


@pytest.mark.parametrize("blocking", [False, True])
def test_api_002_principal_resolves_on_the_loop_unless_it_blocks(
    tmp_path: Path, blocking: bool
) -> None:
    """Local mode resolves its fixed principal on the event loop (one thread hop fewer per
    request); a resolver that reads the store (bearer credentials) runs in a worker thread,
    so it never stalls the loop."""
    settings = load_settings({"database": str(tmp_path / "p.db")}, environ={})
    service = MemoryService(SQLiteStore(settings.database), None, Limits())
    principal = local_principal(settings, "http")
    on_loop: list[bool] = []

    def resolve(_request: object) -> Principal:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return principal

    app = create_app(service, PrincipalResolver(resolve, blocking=blocking))
    with TestClient(app) as c:
        assert c.get("/v1/memories").status_code == 200
    service.store.close()
    assert on_loop == [not blocking]
