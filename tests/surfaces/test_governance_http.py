"""The governance routes over HTTP with real credentials (issue 22): the library's codes on the
wire, every refusal a 4xx with a stable code that changes nothing, and the scope still lists,
recalls and exports after hostile input (LIFE-4..8, SCOPE-6, SCOPE-8, SAFE-4, SAFE-5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from quipu.composition import load_settings
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.runtime import Runtime
from quipu.surfaces.http.server import build_server


@dataclass
class World:
    client: TestClient
    runtime: Runtime
    keys: dict[str, str]

    def h(self, who: str, **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[who]}", **extra}

    def post(self, who: str, path: str, body: Any = None, **kw: Any) -> Any:
        return self.client.post(path, json=body, headers=self.h(who), **kw)

    def get(self, who: str, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers=self.h(who), **kw)


@pytest.fixture
def world(tmp_path: Path, remote_embedder: OpenAICompatEmbedder) -> Iterator[World]:
    s = load_settings({"database": str(tmp_path / "gov.db"), "auth": True}, environ={})
    app, runtime = build_server(s, remote_embedder)
    access = app.state.access
    keys: dict[str, str] = {}
    for tenant in ("t", "u"):
        access.create_tenant(tenant)
        _, keys[f"{tenant}.admin"] = access.create_key(tenant, "admin", agent_id="ops")
        _, keys[f"{tenant}.a"] = access.create_key(tenant, "agent", agent_id="a", user_id="ua")
    _, keys["t.b"] = access.create_key("t", "agent", agent_id="b", user_id="ub")
    _, keys["t.rev"] = access.create_key("t", "agent", agent_id="rev", grants={"memory:review"})
    _, keys["t.dpo"] = access.create_key("t", "agent", agent_id="dpo", grants={"memory:erase"})
    _, keys["root"] = access.create_key("t", "superadmin")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield World(client, runtime, keys)
    runtime.close()


def _code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def _remember(w: World, who: str, text: str, **body: Any) -> str:
    r = w.post(who, "/v1/memories", {"text": text, **body})
    assert r.status_code == 201, r.text
    return str(r.json()["memory"]["id"])


def _still_reads(w: World, who: str) -> None:
    assert w.get(who, "/v1/memories").status_code == 200
    assert w.post(who, "/v1/recall", {"query": "anything"}).status_code == 200
    assert w.post(who, "/v1/recall", {"query": "anything", "scope": "user"}).status_code == 200


def test_life_004_erase_and_holds_over_http(world: World) -> None:
    w = world
    mid = _remember(w, "t.a", "Ona Kestrel keeps bees on the roof", scope="user")
    assert w.post("t.a", f"/v1/memories/{mid}/erase", {"reason": "mine"}).status_code == 403
    assert w.post("u.admin", f"/v1/memories/{mid}/erase", {"reason": "x"}).status_code == 404
    r = w.post("t.admin", "/v1/holds", {"kind": "subject", "target": "ua", "reason": "case 9"})
    assert r.status_code == 201
    hold = r.json()["hold_id"]
    r = w.post("t.dpo", f"/v1/memories/{mid}/erase", {"reason": "request 3"})
    assert r.status_code == 409 and _code(r) == "legal_hold"
    r = w.post("t.admin", "/v1/subjects/ua/erase", {"reason": "request 3"})
    assert r.status_code == 409 and _code(r) == "legal_hold"
    assert w.post("t.dpo", "/v1/holds", {"kind": "tenant", "reason": "x"}).status_code == 403
    held = w.get("t.admin", "/v1/holds").json()["items"]
    assert [h["hold_id"] for h in held] == [hold]
    r = w.post("t.admin", f"/v1/holds/{hold}/release", {"reason": "closed"})
    assert r.status_code == 200 and r.json()["active"] is False
    r = w.post("t.dpo", f"/v1/memories/{mid}/erase", {"reason": "request 3"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tombstone"]["status"] == "erased" and body["families"] == 1
    assert body["counts"]["memory_versions"] == 1 and body["tombstone"]["text"] == ""
    assert w.get("t.a", f"/v1/memories/{mid}").status_code == 404
    versions = w.get("t.a", f"/v1/memories/{mid}/history").json()["versions"]
    assert [v["status"] for v in versions] == ["active", "erased"]
    assert "Kestrel" not in json.dumps(versions)
    r = w.post("t.dpo", f"/v1/memories/{mid}/erase", {"reason": "again"})
    assert r.status_code == 409 and _code(r) == "illegal_transition"
    audit = w.get("t.admin", "/v1/audit").json()["items"]
    erase = next(e for e in audit if e["action"] == "memory.erase")
    assert erase["reason"] == "request 3" and erase["agent_id"] == "dpo"
    assert "Kestrel" not in json.dumps(audit)


def test_life_004_subject_erasure_over_http_is_a_job(world: World) -> None:
    w = world
    mine = _remember(w, "t.a", "Ona Kestrel lives in Lyon", scope="user")
    other = _remember(w, "t.b", "Bo likes tea", scope="user")
    w.post("t.a", "/v1/sessions/s1/turns", {"role": "user", "content": "I am Ona Kestrel"})
    r = w.post("t.admin", "/v1/subjects/ua/erase", {"reason": "art. 17"})
    assert r.status_code == 202 and r.json()["created"]
    job = r.json()["job"]["job_id"]
    again = w.post("t.admin", "/v1/subjects/ua/erase", {"reason": "art. 17"})
    assert again.status_code == 200 and again.json()["job"]["job_id"] == job
    assert w.get("t.admin", f"/v1/erasures/{job}").json()["status"] == "queued"
    assert w.get("t.a", f"/v1/erasures/{job}").status_code == 403
    assert w.get("u.admin", f"/v1/erasures/{job}").status_code == 404
    w.runtime.worker.drain()
    done = w.get("t.admin", f"/v1/erasures/{job}").json()
    assert done["status"] == "succeeded"
    assert done["result"]["families"] == 1 and done["result"]["counts"]["session_turns"] == 1
    assert w.get("t.a", f"/v1/memories/{mine}").status_code == 404
    assert w.get("t.b", f"/v1/memories/{other}").status_code == 200
    assert w.get("t.a", "/v1/sessions/s1/turns").json()["turns"] == []


def test_life_005_review_judge_restore_merge_over_http(world: World) -> None:
    w = world
    cid = _remember(w, "t.a", "Ona prefers the night train", status="candidate")
    queue = w.get("t.rev", "/v1/review").json()["items"]
    assert [m["id"] for m in queue] == [cid]
    assert w.get("t.a", "/v1/review").status_code == 403
    decide = {"decision": "activate", "reason": "mine", "expected_version": 1}
    r = w.post("t.a", f"/v1/review/{cid}", decide)
    assert r.status_code == 403 and _code(r) == "review_required"
    r = w.post("t.rev", f"/v1/review/{cid}", {**decide, "decision": "maybe"})
    assert r.status_code == 422 and _code(r) == "invalid_decision"
    # LIFE-2 over HTTP: a change names the version it replaces (428), after 403 and 404
    r = w.post("t.rev", f"/v1/review/{cid}", {"decision": "activate", "reason": "x"})
    assert r.status_code == 428 and _code(r) == "expected_version_required"
    r = w.post("t.rev", f"/v1/review/{'f' * 32}", {"decision": "activate", "reason": "x"})
    assert r.status_code == 404
    r = w.post("t.rev", f"/v1/review/{cid}", {**decide, "reason": "confirmed"})
    assert r.status_code == 200 and r.json()["status"] == "active"
    r = w.post(
        "t.rev", f"/v1/review/{cid}", {**decide, "decision": "reject", "expected_version": 2}
    )
    assert r.status_code == 409 and _code(r) == "not_in_review"
    r = w.post("t.rev", f"/v1/memories/{cid}/refute", {"reason": "she flies now"})
    assert r.status_code == 428
    r = w.post(
        "t.rev", f"/v1/memories/{cid}/refute", {"reason": "she flies now", "expected_version": 2}
    )
    assert r.status_code == 200 and r.json()["provenance"]["verdict"] == "refuted"
    assert w.get("t.a", "/v1/memories").json()["items"] == []
    r = w.post("t.rev", f"/v1/memories/{cid}/affirm", {"reason": "back", "expected_version": 1})
    assert r.status_code == 409 and _code(r) == "version_conflict"
    r = w.post(
        "t.rev", f"/v1/memories/{cid}/affirm", {"reason": "on trains", "expected_version": 3}
    )
    assert r.json()["trust"] == "verified" and r.json()["status"] == "active"
    mid = _remember(w, "t.a", "The office is on Elm Street")
    w.client.patch(
        f"/v1/memories/{mid}",
        json={"text": "The office is on Oak Street", "expected_version": 1},
        headers=w.h("t.a"),
    )
    r = w.post("t.a", f"/v1/memories/{mid}/restore", {"version": 1})
    assert r.status_code == 428
    r = w.post("t.a", f"/v1/memories/{mid}/restore", {"version": 1, "expected_version": 2})
    assert r.status_code == 200 and r.json()["relation"] == "restores"
    r = w.post("t.b", f"/v1/memories/{mid}/restore", {"version": 1, "expected_version": 3})
    assert r.status_code == 404
    assert w.post("t.b", f"/v1/memories/{mid}/restore", {"version": 1}).status_code == 404
    dup = _remember(w, "t.a", "the office: Elm St.")
    merge = {"ids": [mid, dup], "text": "The office is on Elm", "expected_version": 3}
    assert w.post("t.a", "/v1/memories/merge", {**merge, "expected_version": None}).status_code == (
        428
    )
    r = w.post("t.a", "/v1/memories/merge", merge)
    assert r.status_code == 200 and r.json()["relation"] == "merges"
    r = w.post("t.a", "/v1/memories/merge", {"ids": [mid], "text": "x", "expected_version": 4})
    assert r.status_code == 422 and _code(r) == "invalid_merge"


def test_life_008_scope_006_scope_008_snapshots_projects_oversight(world: World) -> None:
    w = world
    r = w.post("t.a", "/v1/memories", {"text": "apollo ships Monday", "project": "apollo"})
    assert r.status_code == 422 and _code(r) == "invalid_project_id"
    assert w.post("t.a", "/v1/projects", {"project_id": "apollo"}).status_code == 403
    assert w.post("t.admin", "/v1/projects", {"project_id": "apollo"}).status_code == 201
    r = w.post("t.admin", "/v1/projects", {"project_id": "apollo"})
    assert r.status_code == 409 and _code(r) == "project_exists"
    assert [p["project_id"] for p in w.get("t.a", "/v1/projects").json()["items"]] == ["apollo"]
    mid = _remember(w, "t.a", "apollo ships Monday", project="apollo")
    r = w.post("t.a", "/v1/snapshots", {"ids": [mid], "label": "run 1"})
    assert r.status_code == 201
    snap = r.json()["snapshot_id"]
    resolved = w.get("t.a", f"/v1/snapshots/{snap}").json()["members"]
    assert resolved[0]["memory"]["text"] == "apollo ships Monday"
    foreign = w.get("t.b", f"/v1/snapshots/{snap}")  # another key's snapshot: as if missing
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "not_found"
    assert w.get("u.a", f"/v1/snapshots/{snap}").status_code == 404
    w.client.delete(f"/v1/memories/{mid}", headers=w.h("t.a"))
    member = w.get("t.a", f"/v1/snapshots/{snap}").json()["members"][0]
    assert member["memory"] is None and member["withheld"] == "unavailable"
    assert w.post("t.a", "/v1/snapshots", {"ids": [mid]}).status_code == 404
    r = w.get("root", "/v1/admin/subjects")
    assert r.status_code == 422 and _code(r) == "impersonation_tenant_required"
    assert w.get("t.admin", "/v1/admin/subjects").status_code == 403
    r = w.client.get("/v1/admin/subjects", headers=w.h("root", **{"X-Quipu-Tenant": "t"}))
    owners = {s["owner"] for s in r.json()["items"]}
    assert "a" in owners
    r = w.client.get(
        "/v1/admin/memories",
        params={"statuses": ["unavailable"]},
        headers=w.h("root", **{"X-Quipu-Tenant": "t"}),
    )
    assert r.status_code == 422 and _code(r) == "invalid_status"
    r = w.client.get("/v1/admin/memories", headers=w.h("root", **{"X-Quipu-Tenant": "t"}))
    assert r.status_code == 200


DEEP: dict[str, Any] = {"k": 1}
for _ in range(900):
    DEEP = {"k": DEEP}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/memories/{mid}/erase", {"reason": "\ud800"}),
        ("/v1/memories/{mid}/erase", {"reason": "a\x00b"}),
        ("/v1/memories/{mid}/erase", {"reason": "r" * 1001}),
        ("/v1/memories/{mid}/erase", {"reason": 12}),
        ("/v1/memories/{mid}/erase", {"reason": "ok", "tenant_id": "u"}),
        ("/v1/memories/{mid}/erase", {"reason": DEEP}),
        ("/v1/holds", {"kind": "memory", "target": "a/b", "reason": "x"}),
        ("/v1/holds", {"kind": "memory", "target": "{mid}", "reason": "\ud800"}),
        ("/v1/subjects/ua%1Fx/erase", {"reason": "x"}),
        ("/v1/review/{mid}", {"decision": "activate", "reason": "x\x00", "expected_version": 1}),
        ("/v1/memories/{mid}/restore", {"version": 2**70, "expected_version": 1}),
        ("/v1/memories/{mid}/restore", {"version": -1, "expected_version": 1}),
        ("/v1/memories/{mid}/restore", {"version": 1, "expected_version": 2**70}),
        ("/v1/memories/merge", {"ids": ["{mid}", "\ud800"], "text": "x", "expected_version": 1}),
        ("/v1/memories/merge", {"ids": ["{mid}", "{mid}"], "text": "x", "expected_version": 1}),
        ("/v1/snapshots", {"ids": ["{mid}"], "label": "\ud800"}),
        ("/v1/snapshots", {"members": [{"id": "{mid}", "version": 1, "x": DEEP}]}),
        ("/v1/snapshots", {"ids": ["{mid}"] * 500}),
        ("/v1/projects", {"project_id": "p\x00"}),
        ("/v1/projects", {"project_id": "x" * 200}),
        ("/v1/projects", {"project_id": "p", "name": "n" * 1000}),
    ],
)
def test_safe_005_hostile_governance_input_is_a_stable_4xx(
    world: World, path: str, body: dict[str, Any]
) -> None:
    w = world
    mid = _remember(w, "t.a", "Dana prefers window seats", scope="user")
    raw = json.dumps(body).replace("{mid}", mid)  # lone surrogates stay \\ud800 escapes
    url = path.replace("{mid}", mid)
    who = "t.a" if "merge" in path or "restore" in path or "snapshots" in path else "t.admin"
    if "review" in path:
        who = "t.rev"
    r = w.client.post(url, content=raw, headers={**w.h(who), "content-type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert r.json()["error"]["code"]
    assert w.get("t.a", f"/v1/memories/{mid}").json()["version"] == 1
    _still_reads(w, "t.a")


def test_safe_005_an_oversized_body_is_413(world: World) -> None:
    w = world
    mid = _remember(w, "t.a", "Dana prefers window seats")
    r = w.post("t.admin", f"/v1/memories/{mid}/erase", {"reason": "x" * 2_000_000})
    assert r.status_code == 413 and _code(r) == "payload_too_large"
    _still_reads(w, "t.a")


def test_safe_004_job_cancel_and_retry_are_audited_over_http(world: World) -> None:
    w = world
    w.post("t.a", "/v1/sessions/s1/turns", {"role": "user", "content": "I live in Porto."})
    w.post("t.a", "/v1/sessions/s1/turns", {"role": "user", "content": "I like trams."})
    job = w.post("t.a", "/v1/sessions/s1/promote").json()["job"]["job_id"]
    assert w.post("t.a", f"/v1/jobs/{job}/cancel").status_code == 403
    assert w.post("u.admin", f"/v1/jobs/{job}/cancel").status_code == 404
    assert w.post("t.admin", f"/v1/jobs/{job}/cancel").json()["status"] == "cancelled"
    assert w.post("t.admin", f"/v1/jobs/{job}/retry").json()["status"] == "queued"
    actions = [e["action"] for e in w.get("t.admin", "/v1/audit").json()["items"]]
    assert {"job.cancel", "job.retry", "session.append", "session.promote"} <= set(actions)
