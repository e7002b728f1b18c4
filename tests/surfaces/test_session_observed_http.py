"""A session turn's real time over HTTP (issue 24, MEM-2): `observed_at` is kept and read
back; a bad one is a 4xx with a stable code and writes nothing."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from quipu.composition import load_settings
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.surfaces.http.server import build_server


def test_mem_002_turn_observed_at_over_http(
    tmp_path: Path, remote_embedder: OpenAICompatEmbedder
) -> None:
    s = load_settings({"database": str(tmp_path / "s.db"), "worker_embedded": False}, environ={})
    app, runtime = build_server(s, remote_embedder)
    with TestClient(app, raise_server_exceptions=False) as client:
        url = "/v1/sessions/imported/turns"
        r = client.post(
            url,
            json={"role": "user", "content": "hi", "observed_at": "2023-05-20T14:30:00Z"},
        )
        assert r.status_code == 201, r.text
        assert r.json()["observed_at"] == "2023-05-20T14:30:00+00:00"
        for bad in ("yesterday", "2023-13-01T00:00:00Z", 1e308, "9999-12-31T23:59:59-14:00"):
            r = client.post(url, json={"role": "user", "content": "x", "observed_at": bad})
            assert 400 <= r.status_code < 500, (bad, r.text)
            assert r.json()["error"]["code"] in ("invalid_time", "invalid_request"), r.text
        r = client.post(
            url, json={"role": "user", "content": "x", "observed_at": "2999-01-01T00:00:00Z"}
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_time", r.text
        turns = client.get(url).json()["turns"]
        assert [t["observed_at"] for t in turns] == ["2023-05-20T14:30:00+00:00"]
    runtime.close()
