"""Every identifier a caller chooses goes through one secret screen (SAFE-1, SAFE-5): a path
segment, a query parameter, a body field and the X-Request-Id header alike; the
Idempotency-Key is kept only as a digest, never as sent."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from quipu.composition import load_settings
from quipu.core.idempotency import check_key
from quipu.embeddings.local import LocalEmbedder
from quipu.surfaces.http.server import build_server

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # shaped like a GitHub token


@pytest.fixture
def http(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[TestClient]:
    settings = load_settings({"database": str(tmp_path / "ids.db")}, environ={})
    app, runtime = build_server(settings, embedder=local_embedder)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    runtime.close()


def _refused(answer: Any, field: str) -> None:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "secret_detected" and error["details"]["field"] == field
    assert TOKEN not in answer.text


def test_safe_001_a_secret_as_a_session_id_is_refused_in_the_path_and_the_body(
    http: TestClient,
) -> None:
    turn = {"role": "user", "content": "hello"}
    _refused(http.post(f"/v1/sessions/{TOKEN}/turns", json=turn), "session_id")
    _refused(http.post("/v1/memories", json={"text": "a note", "session_id": TOKEN}), "session_id")
    _refused(http.get(f"/v1/sessions/{TOKEN}/turns"), "session_id")
    _refused(http.get(f"/v1/memories/{TOKEN}"), "id")
    assert http.post("/v1/sessions/chat-42/turns", json=turn).status_code == 201


def test_safe_001_a_secret_as_a_request_id_is_refused_and_never_logged(
    http: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="quipu.request"):
        answer = http.get("/v1/memories", headers={"x-request-id": TOKEN})
    _refused(answer, "header.x-request-id")
    assert answer.headers["x-request-id"] != TOKEN
    logged = " ".join(str(getattr(r, "request", "")) + r.getMessage() for r in caplog.records)
    assert TOKEN not in logged
    assert http.get("/healthz", headers={"x-request-id": "trace-7f3a"}).headers["x-request-id"] == (
        "trace-7f3a"
    )


def test_safe_005_the_idempotency_key_is_stored_as_a_digest(
    http: TestClient, tmp_path: Path
) -> None:
    key = "zqxidemkey-" + "7c1d6a4e3f7b4a0e"
    assert key not in check_key([key.encode()])
    body = {"text": "The VPN config lives in the wiki"}
    first = http.post("/v1/memories", json=body, headers={"Idempotency-Key": key})
    again = http.post("/v1/memories", json=body, headers={"Idempotency-Key": key})
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"zqxidemkey" not in stored
