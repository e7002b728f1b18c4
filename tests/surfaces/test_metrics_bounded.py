"""/metrics stays bounded whatever clients send (OPS-1, SAFE-5): every label a client can
influence — method, route, status, refusal code, surface — comes from a closed set or folds into
``other``, so made-up methods, probed paths and odd headers add no series. MCP traffic and
console pages have route labels of their own, apart from real 404s (``unmatched``)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from quipu.composition import load_settings
from quipu.embeddings.local import LocalEmbedder
from quipu.surfaces import metrics
from quipu.surfaces.http.server import build_server

_SERIES = re.compile(r"^quipu_http_requests_total\{(.*)\} ", re.M)


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    folder: Path = tmp_path_factory.mktemp("metrics")
    settings = load_settings({"database": str(folder / "m.db"), "auth": True}, environ={})
    app, runtime = build_server(settings, embedder=local_embedder)
    with TestClient(app, raise_server_exceptions=False) as http:
        yield http
    runtime.close()


def _series(text: str) -> set[str]:
    return set(_SERIES.findall(text))


def _labels(series: set[str], name: str) -> set[str]:
    return {m.group(1) for s in series if (m := re.search(name + r'="([^"]*)"', s))}


def _hostile(rng: random.Random) -> tuple[str, str, dict[str, str]]:
    word = lambda n: "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(n))  # noqa: E731
    method = rng.choice(["GET", "POST", "DELETE", word(rng.randint(3, 12))])
    path = rng.choice(
        [
            f"/{word(8).lower()}",
            f"/v1/memories/{word(10)}",
            f"/v1/{word(6).lower()}/{rng.randint(0, 10**9)}",
            f"/console/{word(5).lower()}",
            f"/mcp/{word(4)}",
            "/mcp",
            "/metrics",
        ]
    )
    headers = {f"x-{word(6).lower()}": word(20), "x-request-id": word(rng.randint(1, 200))}
    return method, path, headers


def test_ops_001_ten_thousand_hostile_requests_add_no_series(client: TestClient) -> None:
    rng = random.Random(20261207)
    for _ in range(1_000):
        client.request(*_hostile(rng)[:2], headers=_hostile(rng)[2])
    first = client.get("/metrics").text
    for _ in range(9_000):
        method, path, headers = _hostile(rng)
        client.request(method, path, headers=headers)
    after = client.get("/metrics").text
    grown = _series(after) - _series(first)
    assert len(grown) <= 5, sorted(grown)  # a late first of a legitimate combination at most
    assert len(after) - len(first) < 20_000, (len(first), len(after))
    series = _series(after)
    assert _labels(series, "method") <= metrics.METHODS | {metrics.OTHER}
    assert metrics.OTHER in _labels(series, "method")
    assert _labels(series, "code") <= metrics.STATUSES | {metrics.OTHER}
    assert len(series) < 400


def test_ops_001_mcp_and_console_have_their_own_route_labels(client: TestClient) -> None:
    client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    client.get("/console/sign-in")
    client.get("/no-such-page")
    routes = _labels(_series(client.get("/metrics").text), "route")
    assert "/mcp" in routes
    assert any(r.startswith("/console/") for r in routes), routes
    assert "unmatched" in routes


def test_ops_001_server_named_labels_are_shape_checked_and_capped() -> None:
    names = metrics.Names()
    assert names("rate_limited") == "rate_limited"
    assert names("Rate Limited\n") == metrics.OTHER
    assert names("x" * 49) == metrics.OTHER
    for i in range(metrics.MAX_NAMES + 10):
        names(f"code_{i}")
    assert names("code_9999") == metrics.OTHER
    assert names("rate_limited") == "rate_limited"  # seen before the cap: kept
    assert metrics.method_label("FOOBAR") == metrics.OTHER
    assert metrics.status_label(999) == metrics.OTHER
