"""Session appends over HTTP in multi-tenant mode: rate-limited with the key's write
bucket, bounded in turns and bytes, with stable 429 codes (issue 20 #8; SESSION-1, MEM-5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from quipu.composition import load_settings
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.surfaces.http.server import build_server


def _client(tmp_path: Path, embedder: OpenAICompatEmbedder, **settings: Any) -> Iterator[Any]:
    s = load_settings(
        {"database": str(tmp_path / "s.db"), "auth": True, "worker_embedded": False, **settings},
        environ={},
    )
    app, runtime = build_server(s, embedder)
    access = app.state.access
    access.create_tenant("t")
    _, key = access.create_key("t", "agent", agent_id="a", user_id="u-a")
    _, other = access.create_key("t", "agent", agent_id="b", user_id="u-b")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, {"authorization": f"Bearer {key}"}, {"authorization": f"Bearer {other}"}
    runtime.close()


@pytest.fixture
def limited(tmp_path: Path, remote_embedder: OpenAICompatEmbedder) -> Iterator[Any]:
    yield from _client(tmp_path, remote_embedder, rate_limit_per_second=0.001, rate_limit_burst=4)


def test_mem_005_session_appends_are_rate_limited_with_retry_after(limited: Any) -> None:
    """Issue 20 #8: 200 turns were accepted from a token already rate-limited for writes."""
    client, me, other = limited
    assert client.post("/v1/memories", json={"text": "one fact"}, headers=me).status_code == 201
    for i in range(3):
        r = client.post(
            "/v1/sessions/s1/turns", json={"role": "user", "content": f"t{i}"}, headers=me
        )
        assert r.status_code == 201, r.text
    r = client.post("/v1/sessions/s1/turns", json={"role": "user", "content": "more"}, headers=me)
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
    assert int(r.headers["retry-after"]) >= 1
    assert client.post("/v1/memories", json={"text": "two"}, headers=me).status_code == 429
    turns = client.get("/v1/sessions/s1/turns", headers=me).json()["turns"]
    assert [t["content"] for t in turns] == ["t0", "t1", "t2"]
    r = client.post("/v1/sessions/s1/turns", json={"role": "user", "content": "x"}, headers=other)
    assert r.status_code == 201


def test_session_001_bounds_answer_429_quota_exceeded(
    tmp_path: Path, remote_embedder: OpenAICompatEmbedder
) -> None:
    """Issue 20 #8: a session holds at most `session_max_turns` turns and a subject at most
    `session_max_bytes_per_owner` bytes of them; past either, 429 `quota_exceeded` naming it."""
    clients = _client(
        tmp_path,
        remote_embedder,
        session_max_turns=3,
        session_max_bytes_per_owner=1_048_576,
    )
    client, me, _ = next(clients)
    for i in range(3):
        r = client.post(
            "/v1/sessions/s1/turns", json={"role": "user", "content": f"t{i}"}, headers=me
        )
        assert r.status_code == 201
    r = client.post("/v1/sessions/s1/turns", json={"role": "user", "content": "t3"}, headers=me)
    assert r.status_code == 429
    assert r.json()["error"]["code"] == "quota_exceeded"
    assert r.json()["error"]["details"]["limit"] == "session_max_turns"
    big = "z" * (100 * 1024)
    codes = [
        client.post(
            f"/v1/sessions/b{i}/turns", json={"role": "user", "content": big}, headers=me
        ).status_code
        for i in range(11)
    ]
    assert codes == [201] * 10 + [429]
    r = client.post("/v1/sessions/b11/turns", json={"role": "user", "content": big}, headers=me)
    assert r.json()["error"]["details"]["limit"] == "session_max_bytes_per_owner"
    clients.close()
