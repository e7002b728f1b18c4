"""JSON at the transport (issue 20 defects 2, 3 and 5; SAFE-5, API-2): deep documents and
invalid text are refused 422 with the field's path before anything walks them, and a stored
value JSON cannot carry never turns a read into a 500."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from quipu.composition import load_settings, local_principal
from quipu.core.records import Principal
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.runtime import Runtime
from quipu.surfaces.http.encoding import TOO_DEEP, json_safe
from quipu.surfaces.http.inbound import MAX_JSON_DEPTH, screen_json, screen_url
from quipu.surfaces.http.server import build_server
from tests.support.poison import store_raw


@dataclass
class Api:
    client: TestClient
    service: MemoryService
    runtime: Runtime
    principal: Principal

    def count(self) -> int:
        """Every version of every memory in the local principal's agent scope."""
        return len(self.client.get("/v1/memories", params={"limit": 100}).json()["items"])


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder) -> Iterator[Api]:
    """One server for the module: every test compares row counts before and after itself."""
    db = tmp_path_factory.mktemp("json") / "j.db"
    settings = load_settings({"database": str(db)}, environ={})
    app, runtime = build_server(settings, local_embedder)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Api(client, runtime.service, runtime, local_principal(settings, "http"))
    runtime.close()


def _nested(depth: int) -> str:
    """A JSON object nested ``depth`` levels (the object itself is level 1)."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


# -- deep JSON (defect 3) ------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, 300, 900, 100_000])
@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("POST", "/v1/memories", '{"text": "deep probe", "metadata": %s}'),
        ("POST", "/v1/recall", '{"query": %s}'),
        ("PATCH", "/v1/memories/nope", '{"text": "x", "reason": %s}'),
        ("POST", "/v1/sessions/s1/turns", '{"role": "user", "content": "x", "metadata": %s}'),
    ],
)
def test_safe_005_issue20_d3_deep_json_is_refused_before_any_walk(
    api: Api, method: str, path: str, template: str, depth: int
) -> None:
    """Deeper than MAX_JSON_DEPTH (counting the body itself): 422 ``json_too_deep`` naming
    where, whatever the route; never a RecursionError, a 500 or a stored row."""
    before = api.count()
    body = (template % _nested(depth)).encode()
    r = api.client.request(method, path, content=body, headers={"content-type": "application/json"})
    if depth + 1 <= MAX_JSON_DEPTH:
        assert r.json().get("error", {}).get("code") != "json_too_deep"
        return
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "json_too_deep", error
    assert error["details"]["field"].startswith("body"), error
    assert api.count() == before


# -- invalid text: lone surrogates and NUL (defects 2 and 5, transport side) ---------------------
SURROGATE, NUL = "\\ud800", "\\u0000"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/memories", '{"text": "ok", "tags": ["%s"]}', "body.tags.0"),
        ("POST", "/v1/memories", '{"text": "ok", "aliases": ["a", "%s"]}', "body.aliases.1"),
        ("POST", "/v1/memories", '{"text": "ok", "metadata": {"k": "%s"}}', "body.metadata.k"),
        ("POST", "/v1/memories", '{"text": "ok", "metadata": {"%sk": 1}}', "body.metadata.\\u{c}k"),
        ("POST", "/v1/memories", '{"text": "ok", "run_id": "%s"}', "body.run_id"),
        ("POST", "/v1/memories", '{"text": "ok", "model": "%s"}', "body.model"),
        ("POST", "/v1/memories", '{"text": "ok", "prompt_version": "%s"}', "body.prompt_version"),
        ("POST", "/v1/memories", '{"text": "ok", "project": "%s"}', "body.project"),
        ("POST", "/v1/memories", '{"text": "ok", "session_id": "%s"}', "body.session_id"),
        ("POST", "/v1/memories", '{"text": "ok", "quote": "%s"}', "body.quote"),
        ("POST", "/v1/memories", '{"text": "ok %s"}', "body.text"),
        ("POST", "/v1/recall", '{"query": "where %s"}', "body.query"),
        ("POST", "/v1/recall", '{"query": "where", "tags": ["%s"]}', "body.tags.0"),
        ("PATCH", "/v1/memories/m1", '{"text": "x", "reason": "%s"}', "body.reason"),
        ("POST", "/v1/memories/m1/supersede", '{"new_id": "%s"}', "body.new_id"),
        ("POST", "/v1/sessions/s1/turns", '{"role": "user", "content": "%s"}', "body.content"),
        (
            "POST",
            "/v1/sessions/s1/turns",
            '{"role": "user", "content": "x", "metadata": {"k": ["%s"]}}',
            "body.metadata.k.0",
        ),
    ],
)
@pytest.mark.parametrize("bad", [SURROGATE, NUL])
def test_safe_005_issue20_invalid_text_in_a_body_is_refused_with_its_path(
    api: Api, method: str, path: str, body: str, field: str, bad: str
) -> None:
    before = api.count()
    r = api.client.request(
        method, path, content=(body % bad).encode(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_text"
    assert error["details"]["field"] == field.replace("{c}", bad[2:].lower())
    assert api.count() == before


@pytest.mark.parametrize(
    ("method", "url", "field"),
    [
        ("DELETE", "/v1/memories/m1?reason=%00", "query.reason"),
        ("GET", "/v1/memories?project=a%00b", "query.project"),
        ("GET", "/v1/memories?tags=ok&tags=%00", "query.tags"),
        ("GET", "/v1/memories/m%00", "path"),
        ("GET", "/v1/sessions/s%001/turns", "path"),
    ],
)
def test_safe_005_issue20_nul_in_the_url_is_refused(
    api: Api, method: str, url: str, field: str
) -> None:
    r = api.client.request(method, url)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_text"
    assert r.json()["error"]["details"]["field"] == field


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "ok", "tags": ["\xed\xa0\x80"]}',  # a lone surrogate's UTF-8 bytes
        '{"text": "ok", "tags": ["\\ud800"]}'.encode("utf-16"),  # JSON, but not UTF-8
        b'{"text": "ok", "tags": ["\xff"]}',
    ],
    ids=["surrogate-bytes", "utf-16", "invalid-utf-8"],
)
def test_safe_005_issue20_a_body_that_is_not_utf8_is_refused(api: Api, body: bytes) -> None:
    """Python's ``json.loads(bytes)`` (what the framework calls) decodes UTF-16, and the UTF-8
    bytes of a lone surrogate with ``surrogatepass``: a check of escapes alone would let
    both through to storage."""
    before = api.count()
    r = api.client.post("/v1/memories", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_text"
    assert r.json()["error"]["details"]["field"] == "body"
    assert api.count() == before


def test_safe_005_issue20_a_byte_order_mark_does_not_hide_an_escape(api: Api) -> None:
    body = b'\xef\xbb\xbf{"text": "ok", "tags": ["\\ud800"]}'
    r = api.client.post("/v1/memories", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "body.tags.0"


def test_safe_005_valid_astral_text_and_escapes_pass(api: Api) -> None:
    """A surrogate *pair* is one astral character, and escaped quotes are text: both fine."""
    body = '{"text": "The user likes \\ud83d\\ude00 and \\"quotes\\"", "tags": ["\\u00e9t\\u00e9"]}'
    r = api.client.post("/v1/memories", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 201, r.text
    assert r.json()["memory"]["text"] == 'The user likes \U0001f600 and "quotes"'
    assert r.json()["memory"]["tags"] == ["été"]


# -- a stored value JSON cannot carry (defect 2, read side of the transport) ---------------------
def test_safe_005_issue20_d2_a_stored_lone_surrogate_never_breaks_a_read(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A row holding lone surrogates, written straight into the store (as rows written before
    the write-side validator may): list, get, history and recall answer 200 with U+FFFD in their
    place, and a warning is logged; the other rows of the scope stay readable."""
    good = api.service.remember(api.principal, "The office cat is called Miso").memory
    api.service.remember(api.principal, "Deploys happen on Tuesdays")
    poisoned = dataclasses.replace(
        good,
        id="poisoned000000000000000000000001",
        text="The office dog is called Rex",
        tags=("pets\ud800",),
        metadata={"note\udfff": "value \ud800 here"},
        content_hash="0" * 64,
    )
    store_raw(api.service.store, poisoned)
    with caplog.at_level(logging.WARNING, logger="quipu.http"):
        listed = api.client.get("/v1/memories")
        got = api.client.get(f"/v1/memories/{poisoned.id}")
        history = api.client.get(f"/v1/memories/{poisoned.id}/history")
        recalled = api.client.post("/v1/recall", json={"query": "what is the office dog called?"})
    for r in (listed, got, history, recalled):
        assert r.status_code == 200, r.text
        assert "\\ud8" not in r.text and "\\udf" not in r.text
    assert {good.id} < {m["id"] for m in listed.json()["items"]}
    assert got.json()["tags"] == ["pets\ufffd"]
    assert got.json()["metadata"] == {"note\ufffd": "value \ufffd here"}
    assert any(h["id"] == poisoned.id for h in recalled.json()["results"])
    assert any("U+FFFD" in r.getMessage() for r in caplog.records)


def test_json_safe_copies_without_recursion() -> None:
    deep: object = "leaf"
    for _ in range(50_000):
        deep = [deep]
    safe = json_safe({"a": deep, "f": float("nan"), "s": "x\ud800", "t": (1, 2)}, max_depth=4)
    assert safe == {"a": [[[TOO_DEEP]]], "f": None, "s": "x\ufffd", "t": [1, 2]}


def test_screen_json_fast_path_and_paths() -> None:
    assert screen_json(b'{"text": "plain", "tags": ["a", "b"]}') is None
    assert screen_json(b"not json at all {{{{") is None  # the framework answers that
    refusal = screen_json(('{"a": ' * 40 + "1" + "}" * 40).encode())
    assert refusal is not None and refusal.code == "json_too_deep"
    assert refusal.field == "body.a.a.a.a.a.....a.a.a.a.a"
    refusal = screen_json('{"m": {"k": ["ok", "\\u0000"]}}')
    assert refusal is not None and refusal.field == "body.m.k.1"
    assert screen_url("/v1/memories/x", b"reason=fine&limit=3") is None
    assert screen_url("/v1/memories/x", b"a=1&r%00=2") is not None
