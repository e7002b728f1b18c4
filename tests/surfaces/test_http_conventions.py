"""HTTP conventions and operability (issue 27, API-2, OPS-1): Location on 201, idempotent
forget, Idempotency-Key stored in the store (both backends), X-Request-Id, the request log line,
/metrics, /readyz, typed response models, the bearer scheme, /docs without a CDN.

Real parts: the app over a real store (SQLite file; PostgreSQL with the test server), the
bundled model, prometheus-client's own exposition, a real OpenAI-protocol client pointed at a
closed port for a failing embedder. Hostile headers are sent as raw ASGI bytes (an HTTP client
library refuses to send a NUL)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from quipu.core.idempotency import IdempotencyScope, check_key, replayable
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.memories import MemoryService
from quipu.surfaces.http import responses
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver
from quipu.surfaces.http.logs import JsonLines
from quipu.surfaces.metrics import CountingEmbedder

ALICE = Principal("t1", "key-alice", Role.ADMIN, agent_id="alice", user_id="dana")
BOB = Principal("t1", "key-bob", Role.AGENT, agent_id="bob", user_id="dana")


@pytest.fixture
def svc(make_store: Callable[..., Any], local_embedder: LocalEmbedder) -> Iterator[MemoryService]:
    service = MemoryService(make_store(), local_embedder, Limits())
    yield service
    service.store.close()


def _client(service: MemoryService, who: Principal = ALICE) -> TestClient:
    return TestClient(create_app(service, local_resolver(who)), raise_server_exceptions=False)


def asgi(
    app: FastAPI, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request as raw ASGI messages: headers exactly as given (NUL and non-ASCII bytes
    included), the status, headers and body of the answer."""
    out: dict[str, Any] = {"headers": {}, "body": b""}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = dict(message.get("headers", []))
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }

    async def main() -> None:
        async with anyio.create_task_group():
            await app(scope, receive, send)

    anyio.run(main)
    return out["status"], out["headers"], out["body"]


# -- Location, idempotent forget -----------------------------------------------------------------
def test_api_002_created_answers_name_their_location(svc: MemoryService) -> None:
    with _client(svc) as http:
        made = http.post("/v1/memories", json={"text": "Deploys run on Tuesdays"})
        assert made.status_code == 201
        location = made.headers["location"]
        assert location == f"/v1/memories/{made.json()['memory']['id']}"
        assert http.get(location).json()["text"] == "Deploys run on Tuesdays"
        # the governance plane's creations name theirs too, and each can be read there
        mid = made.json()["memory"]["id"]
        for path, body, key in (
            ("/v1/holds", {"kind": "subject", "target": "u7", "reason": "case"}, "hold_id"),
            ("/v1/snapshots", {"ids": [mid]}, "snapshot_id"),
            ("/v1/projects", {"project_id": "apollo:2@x", "name": "Apollo"}, "project_id"),
        ):
            made = http.post(path, json=body)
            assert made.status_code == 201, made.text
            location = made.headers["location"]
            assert location == f"{path}/{quote(made.json()[key], safe='')}"
            assert http.get(location).json()[key] == made.json()[key], path
        assert http.get("/v1/holds/nope").status_code == 404
        assert http.get("/v1/projects/nope").json()["error"]["code"] == "not_found"
        queued = http.post("/v1/subjects/u7x/erase", json={"reason": "asked"})
        assert queued.status_code == 202
        assert queued.headers["location"] == f"/v1/erasures/{queued.json()['job']['job_id']}"
        assert http.get(queued.headers["location"]).status_code == 200


def test_api_002_a_second_forget_is_200_not_409(svc: MemoryService) -> None:
    with _client(svc) as http:
        mid = http.post("/v1/memories", json={"text": "Old locker code 4411"}).json()["memory"][
            "id"
        ]
        first = http.delete(f"/v1/memories/{mid}")
        assert first.status_code == 200 and first.json()["status"] == "unavailable"
        again = http.delete(f"/v1/memories/{mid}", params={"expected_version": 1})
        assert again.status_code == 200 and again.json() == first.json()
        posted = http.post(f"/v1/memories/{mid}/forget", json={"reason": "retry"})
        assert posted.status_code == 200 and posted.json()["version"] == 2
        assert len(http.get(f"/v1/memories/{mid}/history").json()["versions"]) == 2
        missing = http.delete("/v1/memories/" + "0" * 32)
        assert missing.status_code == 404
    with _client(svc, BOB) as bob:  # another subject's forgotten memory stays invisible
        assert bob.delete(f"/v1/memories/{mid}").status_code == 404


# -- Idempotency-Key ---------------------------------------------------------------------------
def test_api_002_idempotency_key_replays_the_first_answer(svc: MemoryService) -> None:
    key = {"Idempotency-Key": "7c1d6a4e-3f7b-4a0e-9a51-1b2f3c4d5e6f"}
    body = {"text": "The VPN config lives in the wiki", "scope": "user"}
    with _client(svc) as http:
        first = http.post("/v1/memories", json=body, headers=key)
        again = http.post("/v1/memories", json=body, headers=key)
        assert first.status_code == again.status_code == 201  # a rerun would be 200 created=false
        assert again.content == first.content
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["location"] == first.headers["location"]
        assert "idempotent-replayed" not in first.headers
        other = http.post("/v1/memories", json={**body, "text": "changed"}, headers=key)
        assert other.status_code == 422
        assert other.json()["error"]["code"] == "idempotency_key_reused"
        listed = http.get("/v1/memories", params={"scope": "user"}).json()["items"]
        assert len(listed) == 1
    # A key belongs to the credential that sent it: Bob's same key is a new request.
    with _client(svc, BOB) as bob:
        theirs = bob.post("/v1/memories", json=body, headers=key)
        assert theirs.status_code in (200, 201) and "idempotent-replayed" not in theirs.headers
    # Stored in the store: a new app on the same store (a restart) still replays it.
    with _client(svc) as restarted:
        replay = restarted.post("/v1/memories", json=body, headers=key)
        assert replay.content == first.content and replay.headers["idempotent-replayed"] == "true"


def test_api_002_idempotency_key_in_progress_and_expired(svc: MemoryService) -> None:
    now = datetime.now(UTC)
    # the store keeps each key as its digest (check_key), never as sent
    busy = IdempotencyScope(ALICE.tenant_id, ALICE.key_id, check_key([b"busy-key"]))
    old = IdempotencyScope(ALICE.tenant_id, ALICE.key_id, check_key([b"old-key"]))
    body = {"text": "The office closes at six"}
    with _client(svc) as http:
        raw = json.dumps(body, separators=(",", ":")).encode()
        from quipu.core.idempotency import fingerprint

        mark = fingerprint("POST", "/v1/memories", b"", raw)
        assert svc.store.claim_idempotency(busy, mark, now, now + timedelta(hours=1)) is None
        running = http.post(
            "/v1/memories",
            content=raw,
            headers={"Idempotency-Key": "busy-key", "content-type": "application/json"},
        )
        assert running.status_code == 409 and running.headers["retry-after"] == "1"
        assert running.json()["error"]["code"] == "idempotency_key_in_progress"
        # a claim from two days ago, past the window, is pruned and the key is free again
        svc.store.claim_idempotency(old, "x" * 64, now - timedelta(days=2), now - timedelta(days=1))
        fresh = http.post("/v1/memories", json=body, headers={"Idempotency-Key": "old-key"})
        assert fresh.status_code == 201 and "idempotent-replayed" not in fresh.headers


def test_api_002_idempotency_key_is_ignored_on_reads_and_failures_are_not_kept(
    svc: MemoryService,
) -> None:
    key = {"Idempotency-Key": "read-key"}
    with _client(svc) as http:
        http.post("/v1/memories", json={"text": "Parking is on level 2"})
        first = http.post("/v1/recall", json={"query": "parking"}, headers=key)
        second = http.post("/v1/recall", json={"query": "where to park?"}, headers=key)
        assert first.status_code == second.status_code == 200  # not idempotency_key_reused
    assert replayable(201) and replayable(404) and replayable(409)
    assert not replayable(429) and not replayable(500) and not replayable(503)


@pytest.mark.parametrize(
    "value",
    [b"", b"a\x00b", b"\xed\xa0\x80", b"caf\xc3\xa9", b"two words", b"k" * 256, None],
)
def test_safe_005_hostile_idempotency_keys_are_coded_422(
    svc: MemoryService, value: bytes | None
) -> None:
    app = create_app(svc, local_resolver(ALICE))
    headers = (
        [(b"idempotency-key", b"a"), (b"idempotency-key", b"b")]
        if value is None
        else [(b"idempotency-key", value)]
    )
    status, _, body = asgi(app, "POST", "/v1/memories", headers, b'{"text": "x is y"}')
    assert status == 422 and json.loads(body)["error"]["code"] == "invalid_idempotency_key"
    assert svc.list(ALICE).items == []  # nothing was written


# -- X-Request-Id and the request log line -------------------------------------------------------
def test_ops_001_request_id_is_echoed_minted_and_logged(
    svc: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    with _client(svc) as http, caplog.at_level(logging.INFO, logger="quipu.request"):
        given = http.get("/healthz", headers={"X-Request-Id": "trace-7/b=1"})
        assert given.headers["x-request-id"] == "trace-7/b=1"
        minted = http.get("/healthz").headers["x-request-id"]
        assert len(minted) == 32
        secret = "Dana's passport number is in the safe"
        made = http.post("/v1/memories", json={"text": secret}, headers={"X-Request-Id": "r-1"})
        http.delete(f"/v1/memories/{made.json()['memory']['id']}", params={"reason": "private why"})
    lines = [JsonLines().format(r) for r in caplog.records if r.name == "quipu.request"]
    records = [json.loads(line) for line in lines]
    write = next(r for r in records if r["request_id"] == "r-1")
    assert write["route"] == "/v1/memories" and write["status"] == 201
    assert write["key_id"] == "key-alice" and write["method"] == "POST"
    assert write["duration_ms"] > 0
    forget = records[-1]
    assert forget["route"] == "/v1/memories/{memory_id}" and forget["status"] == 200
    text = "\n".join(lines)
    assert secret not in text and "private why" not in text and "reason=" not in text
    assert made.json()["memory"]["id"] not in text  # the route template, never the raw path


@pytest.mark.parametrize("value", [b"a\x00b", b"\xed\xa0\x80", b"x" * 129, b"has space", None])
def test_safe_005_hostile_request_ids_are_coded_422(
    svc: MemoryService, value: bytes | None
) -> None:
    app = create_app(svc, local_resolver(ALICE))
    headers = (
        [(b"x-request-id", b"a"), (b"x-request-id", b"b")]
        if value is None
        else [(b"x-request-id", value)]
    )
    status, answer_headers, body = asgi(app, "GET", "/healthz", headers)
    assert status == 422 and json.loads(body)["error"]["code"] == "invalid_request_id"
    assert len(answer_headers[b"x-request-id"]) == 32  # a fresh id, never the hostile one


# -- /metrics and /readyz ----------------------------------------------------------------------
def _metric(text: str, name: str, **labels: str) -> float:
    for row in text.splitlines():
        if row.startswith(name + "{") and all(f'{k}="{v}"' in row for k, v in labels.items()):
            return float(row.rsplit(" ", 1)[1])
    return 0.0


def test_ops_001_metrics_count_requests_refusals_recall_stages_and_jobs(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    from quipu.composition import build_runtime, load_settings
    from quipu.storage.sqlite.store import SQLiteStore

    settings = load_settings({"database": str(tmp_path / "m.db")}, environ={})
    service = MemoryService(SQLiteStore(settings.database), local_embedder, Limits())
    runtime = build_runtime(settings, service)
    app = create_app(service, local_resolver(ALICE), runtime=runtime)
    with TestClient(app) as http:
        before = http.get("/metrics").text
        http.post("/v1/memories", json={"text": "The build server is ci-3"})
        http.post("/v1/recall", json={"query": "build server"})
        assert http.get("/v1/memories/" + "f" * 32).status_code == 404
        http.post("/v1/sessions/s1/turns", json={"role": "user", "content": "I live in Porto"})
        http.post("/v1/sessions/s1/turns", json={"role": "assistant", "content": "Noted"})
        assert http.post("/v1/sessions/s1/promote").status_code == 202
        after = http.get("/metrics")
    runtime.close()
    assert after.headers["content-type"].startswith("text/plain")
    text = after.text
    route = {"route": "/v1/memories", "method": "POST", "code": "201"}
    assert (
        _metric(text, "quipu_http_requests_total", **route)
        == _metric(before, "quipu_http_requests_total", **route) + 1
    )
    assert _metric(text, "quipu_http_request_duration_seconds_count", route="/v1/recall") >= 1
    assert _metric(text, "quipu_refusals_total", code="not_found", surface="http") >= 1
    assert _metric(text, "quipu_recall_stage_seconds_count", stage="embed") >= 1
    assert _metric(text, "quipu_recall_stage_seconds_count", stage="total") >= 1
    assert _metric(text, "quipu_jobs", status="queued") == 1
    assert _metric(text, "quipu_job_oldest_age_seconds", status="queued") >= 0


def test_ops_001_readiness_checks_store_and_model(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    from quipu.storage.sqlite.store import SQLiteStore

    ready = MemoryService(SQLiteStore(tmp_path / "r.db"), local_embedder, Limits())
    with _client(ready) as http:
        answer = http.get("/readyz")
        assert answer.status_code == 200 and answer.json()["checks"]["embedder"]["ok"] is True
    ready.store.close()
    # An embedder whose server is gone (a real client, a closed port): 503, counted as a failure.
    dead = CountingEmbedder(
        OpenAICompatEmbedder(base_url="http://127.0.0.1:9/v1", model="m", dimension=8, timeout=2.0)
    )
    broken = MemoryService(SQLiteStore(tmp_path / "b.db"), dead, Limits())
    with _client(broken) as http:
        answer = http.get("/readyz")
        assert answer.status_code == 503, answer.text
        checks = answer.json()["checks"]
        assert checks["store"]["ok"] is True and checks["embedder"]["ok"] is False
        assert (
            _metric(http.get("/metrics").text, "quipu_embedder_failures_total", operation="query")
            >= 1
        )
    broken.store.close()


# -- OpenAPI and /docs -------------------------------------------------------------------------
def test_api_002_openapi_declares_bearer_and_typed_answers(svc: MemoryService) -> None:
    with _client(svc) as http:
        document = http.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (qk_...) or a run token (qt_...).",
    }
    untyped = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/v1"):
                assert operation["security"] == [{"bearer": []}], (method, path)
            ok = next(v for k, v in operation["responses"].items() if k.startswith("2"))
            schema = ok.get("content", {}).get("application/json", {}).get("schema", {})
            if "application/json" in ok.get("content", {}) and "$ref" not in schema:
                untyped.append(f"{method} {path}")
    assert untyped == [], untyped


def test_api_002_real_answers_match_their_models(svc: MemoryService) -> None:
    with _client(svc) as http:
        made = http.post("/v1/memories", json={"text": "Lunch is at noon", "tags": ["office"]})
        responses.RememberOut.model_validate(made.json(), strict=False)
        mid = made.json()["memory"]["id"]
        responses.MemoryOut.model_validate(http.get(f"/v1/memories/{mid}").json())
        responses.MemoryPageOut.model_validate(http.get("/v1/memories").json())
        responses.HistoryOut.model_validate(http.get(f"/v1/memories/{mid}/history").json())
        for body in ({"query": "lunch"}, {"query": "lunch", "verbose": True, "fields": ["tags"]}):
            responses.RecallOut.model_validate(http.post("/v1/recall", json=body).json())
        responses.AuditPageOut.model_validate(http.get("/v1/audit").json())
        responses.HealthOut.model_validate(http.get("/healthz").json())
        # the governance plane's answers (issue 22) are typed too
        hold = http.post("/v1/holds", json={"kind": "subject", "target": "u9", "reason": "case"})
        responses.HoldOut.model_validate(hold.json(), strict=False)
        responses.HoldsOut.model_validate(http.get("/v1/holds").json())
        lifted = http.post(f"/v1/holds/{hold.json()['hold_id']}/release", json={"reason": "over"})
        responses.HoldOut.model_validate(lifted.json())
        made = http.post("/v1/projects", json={"project_id": "apollo", "name": "Apollo"})
        responses.ProjectOut.model_validate(made.json())
        responses.ProjectsOut.model_validate(http.get("/v1/projects").json())
        snap = http.post("/v1/snapshots", json={"ids": [mid], "label": "run-1"})
        responses.SnapshotOut.model_validate(snap.json())
        resolved = http.get(f"/v1/snapshots/{snap.json()['snapshot_id']}")
        responses.SnapshotOut.model_validate(resolved.json())
        responses.MemoryPageOut.model_validate(http.get("/v1/review").json())
        erased = http.post(f"/v1/memories/{mid}/erase", json={"reason": "asked"})
        responses.EraseOut.model_validate(erased.json())
        queued = http.post("/v1/subjects/dana/erase", json={"reason": "asked"})
        responses.PromoteOut.model_validate(queued.json())
        job = http.get(f"/v1/erasures/{queued.json()['job']['job_id']}")
        responses.JobOut.model_validate(job.json())


def test_api_002_docs_load_without_a_cdn(svc: MemoryService) -> None:
    with _client(svc) as http:
        for page in ("/docs", "/redoc"):
            html = http.get(page).text
            assert "https://" not in html and "http://" not in html, page
            for asset in ("/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css"):
                if asset.rsplit("/", 1)[1].split(".")[0] in html or page == "/docs":
                    assert asset in html or page == "/redoc"
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
            served = http.get(f"/docs/static/{asset}")
            assert served.status_code == 200 and len(served.content) > 100_000, asset
