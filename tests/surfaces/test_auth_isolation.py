"""Multi-tenant mode over HTTP: credentials, run tokens, impersonation, limits, audit and the
isolation matrix (SCOPE-1..8, MEM-5, SAFE-4)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.surfaces.http.server import build_server
from tests.support.embedding_server import EmbeddingServer

SCOPES = ["agent", "user", "agent_user"]


@dataclass
class World:
    client: TestClient
    access: Access
    keys: dict[str, str]
    server: EmbeddingServer

    def h(self, who: str, **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[who]}", **extra}


def _world(
    tmp_path: Path, embedder: OpenAICompatEmbedder, server: EmbeddingServer, **settings: Any
) -> Iterator[World]:
    s = load_settings({"database": str(tmp_path / "mt.db"), "auth": True, **settings}, environ={})
    app, runtime = build_server(s, embedder)
    access: Access = app.state.access
    keys: dict[str, str] = {}
    for tenant in ("t", "u"):
        access.create_tenant(tenant)
        for agent in ("a", "b"):
            _, keys[f"{tenant}.{agent}"] = access.create_key(
                tenant, "agent", agent_id=agent, user_id=f"user-{agent}"
            )
        _, keys[f"{tenant}.service"] = access.create_key(tenant, "service")
        _, keys[f"{tenant}.admin"] = access.create_key(tenant, "admin")
    _, keys["root"] = access.create_key("t", "superadmin")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield World(client, access, keys, server)
    runtime.close()


@pytest.fixture
def world(
    tmp_path: Path, remote_embedder: OpenAICompatEmbedder, embedding_server: EmbeddingServer
) -> Iterator[World]:
    yield from _world(tmp_path, remote_embedder, embedding_server)


def test_scope_001_requests_need_a_valid_credential(world: World) -> None:
    c = world.client
    for headers in (
        {},
        {"authorization": "Bearer nope"},
        {"authorization": "Basic abc"},
        {"authorization": "Bearer qk_0123456789abcdef_" + "x" * 43},
    ):
        r = c.post("/v1/recall", json={"query": "hi"}, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert c.post("/v1/recall", json={"query": "hi"}, headers=world.h("t.a")).status_code == 200


def test_scope_001_revocation_takes_effect_on_the_next_request(world: World) -> None:
    c = world.client
    key_id = world.keys["t.a"].split("_")[1]
    assert (
        c.post("/v1/memories", json={"text": "before revoke"}, headers=world.h("t.a")).status_code
        == 201
    )
    world.access.revoke_key("t", key_id)
    r = c.post("/v1/recall", json={"query": "before"}, headers=world.h("t.a"))
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]


def test_scope_002_run_tokens_bind_agent_and_user_and_expire(world: World) -> None:
    c = world.client
    r = c.post(
        "/v1/tokens",
        json={"agent_id": "a", "user_id": "user-a", "ttl_seconds": 60},
        headers=world.h("t.service"),
    )
    assert r.status_code == 201
    token = r.json()["token"]
    assert token.startswith("qt_")
    run = {"authorization": f"Bearer {token}"}
    c.post(
        "/v1/memories",
        json={"text": "written by a run of agent a", "scope": "agent_user"},
        headers=run,
    )
    # the run token acts as (a, user-a): agent a's own key sees the same agent_user scope
    found = c.post(
        "/v1/recall",
        json={"query": "run of agent a", "scope": "agent_user"},
        headers=world.h("t.a"),
    ).json()
    assert [h["text"] for h in found["results"]] == ["written by a run of agent a"]
    # agents cannot mint; tokens cannot mint
    assert c.post("/v1/tokens", json={"agent_id": "x"}, headers=world.h("t.a")).status_code == 403
    assert c.post("/v1/tokens", json={"agent_id": "x"}, headers=run).status_code == 403
    assert (
        c.post(
            "/v1/tokens", json={"agent_id": "x", "ttl_seconds": 10**7}, headers=world.h("t.service")
        ).json()["error"]["code"]
        == "invalid_ttl"
    )
    # expiry, and revocation of the minting key, both end the token
    later = datetime.now(UTC) + timedelta(seconds=61)
    world.access._clock = lambda: later
    assert c.post("/v1/recall", json={"query": "x"}, headers=run).status_code == 401
    world.access._clock = lambda: datetime.now(UTC)
    assert c.post("/v1/recall", json={"query": "x"}, headers=run).status_code == 200
    world.access.revoke_key("t", world.keys["t.service"].split("_")[1])
    assert c.post("/v1/recall", json={"query": "x"}, headers=run).status_code == 401


def test_scope_002_identity_fields_in_bodies_are_rejected(world: World) -> None:
    c = world.client
    for field in ("tenant_id", "owner", "subject_id", "user_id", "agent_id"):
        r = c.post(
            "/v1/memories", json={"text": "x", field: "someone-else"}, headers=world.h("t.a")
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", field
        r = c.post("/v1/recall", json={"query": "x", field: "someone-else"}, headers=world.h("t.a"))
        assert r.status_code == 422, field


def test_scope_008_superadmin_needs_the_impersonation_header_and_is_audited(world: World) -> None:
    c = world.client
    mid = c.post(
        "/v1/memories", json={"text": "u's agent b private fact"}, headers=world.h("u.b")
    ).json()["memory"]["id"]
    r = c.get(
        "/v1/admin/memories", params={"scope": "agent", "owner": "b"}, headers=world.h("root")
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "impersonation_tenant_required"
    r = c.get(
        "/v1/admin/memories",
        params={"scope": "agent", "owner": "b"},
        headers=world.h("root", **{"X-Quipu-Tenant": "u"}),
    )
    assert [m["id"] for m in r.json()["items"]] == [mid]
    # a tenant admin is not a superadmin
    assert (
        c.get(
            "/v1/admin/memories",
            params={"scope": "agent", "owner": "b"},
            headers=world.h("u.admin"),
        ).status_code
        == 403
    )
    gone = c.delete(
        f"/v1/admin/memories/{mid}",
        params={"reason": "GDPR request"},
        headers=world.h("root", **{"X-Quipu-Tenant": "u"}),
    )
    assert gone.json()["status"] == "unavailable"
    audit = c.get("/v1/audit", headers=world.h("u.admin")).json()["items"]
    actions = [e["action"] for e in audit]
    assert (
        "oversight.list" in actions
        and "oversight.forget" in actions
        and "memory.created" in actions
    )
    forget = next(e for e in audit if e["action"] == "oversight.forget")
    assert (
        forget["target_ids"] == [mid]
        and forget["reason"] == "GDPR request"
        and forget["role"] == "superadmin"
    )
    # tenant t's audit log holds nothing of tenant u
    t_audit = c.get("/v1/audit", headers=world.h("t.admin")).json()["items"]
    assert all(mid not in e["target_ids"] for e in t_audit)
    assert c.get("/v1/audit", headers=world.h("u.a")).status_code == 403


def test_safe_004_audit_is_paginated(world: World) -> None:
    c = world.client
    for i in range(5):
        c.post("/v1/memories", json={"text": f"fact {i}"}, headers=world.h("t.a"))
    first = c.get("/v1/audit", params={"limit": 2}, headers=world.h("t.admin")).json()
    second = c.get(
        "/v1/audit", params={"limit": 2, "cursor": first["next_cursor"]}, headers=world.h("t.admin")
    ).json()
    seqs = [e["seq"] for e in first["items"] + second["items"]]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == 4


def _paths(
    c: TestClient, headers: dict[str, str], mid: str, scope: str, query: str
) -> dict[str, Any]:
    """What a caller can observe about ``mid`` and its text, through every read and write route."""
    out: dict[str, Any] = {}
    recall = c.post("/v1/recall", json={"query": query, "scope": scope}, headers=headers).json()
    out["recall"] = [h["id"] for h in recall.get("results", [])]
    out["recall_total"] = recall.get("meta", {}).get("total")
    listed = c.get("/v1/memories", params={"scope": scope}, headers=headers).json()
    out["list"] = [m["id"] for m in listed.get("items", [])]
    for name, method, path, body in [
        ("get", "GET", f"/v1/memories/{mid}", None),
        ("history", "GET", f"/v1/memories/{mid}/history", None),
        ("patch", "PATCH", f"/v1/memories/{mid}", {"text": "overwritten"}),
        ("status", "PATCH", f"/v1/memories/{mid}", {"status": "archived"}),
        ("delete", "DELETE", f"/v1/memories/{mid}", None),
        ("supersede", "POST", f"/v1/memories/{mid}/supersede", {"new_id": mid}),
    ]:
        r = c.request(method, path, json=body, headers=headers)
        out[name] = (
            r.status_code,
            r.json()["error"]["code"] if r.status_code >= 400 else None,
            r.json()["error"]["message"].replace(mid, "<id>") if r.status_code >= 400 else None,
        )
    return out


@pytest.mark.parametrize("degraded", [False, True], ids=["healthy", "embedder-down"])
def test_scope_007_isolation_matrix(world: World, degraded: bool) -> None:
    """Tenants t,u x subjects a,b x scopes: nothing of a's in t crosses to b in t, or to a or b
    in u — no row, no count, no different error — on the healthy and the fallback path."""
    c = world.client
    owned: dict[str, str] = {}
    for scope in SCOPES:
        text = f"zebra orchard secret number {scope}"
        r = c.post("/v1/memories", json={"text": text, "scope": scope}, headers=world.h("t.a"))
        owned[scope] = r.json()["memory"]["id"]
    world.server.down = degraded
    missing = "f" * 32
    for scope, mid in owned.items():
        query = f"zebra orchard secret number {scope}"
        mine = c.post(
            "/v1/recall", json={"query": query, "scope": scope}, headers=world.h("t.a")
        ).json()
        assert mine["meta"]["fallback"] is degraded and mid in [h["id"] for h in mine["results"]]
        for outsider in ("t.b", "u.a", "u.b"):
            seen = _paths(c, world.h(outsider), mid, scope, query)
            assert seen["recall"] == [] and seen["recall_total"] == 0 and seen["list"] == [], (
                outsider
            )
            baseline = _paths(c, world.h(outsider), missing, scope, query)
            for route in ("get", "history", "patch", "status", "delete", "supersede"):
                assert seen[route] == baseline[route], (outsider, route)
                assert seen[route][0] == 404
    # and the owner's rows are untouched by all those attempts
    world.server.down = False
    for mid in owned.values():
        r = c.get(f"/v1/memories/{mid}", headers=world.h("t.a"))
        assert r.status_code == 200 and r.json()["version"] == 1


def test_scope_007_tenant_scope_is_per_tenant(world: World) -> None:
    c = world.client
    c.post(
        "/v1/memories",
        json={"text": "office closes at six", "scope": "tenant"},
        headers=world.h("t.admin"),
    )
    assert (
        c.post(
            "/v1/memories",
            json={"text": "agents cannot", "scope": "tenant"},
            headers=world.h("t.a"),
        ).status_code
        == 403
    )
    seen_t = c.post(
        "/v1/recall", json={"query": "office closes", "scope": "tenant"}, headers=world.h("t.b")
    ).json()
    seen_u = c.post(
        "/v1/recall", json={"query": "office closes", "scope": "tenant"}, headers=world.h("u.b")
    ).json()
    assert len(seen_t["results"]) == 1 and seen_u["results"] == []


def test_mem_005_rate_limit_and_quota_under_concurrent_requests(
    tmp_path: Path, remote_embedder: OpenAICompatEmbedder, embedding_server: EmbeddingServer
) -> None:
    worlds = _world(
        tmp_path,
        remote_embedder,
        embedding_server,
        rate_limit_per_second=0.001,
        rate_limit_burst=30,
        quota_per_owner=20,
    )
    w = next(worlds)
    codes: list[tuple[int, str | None, str | None]] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        for i in range(10):
            r = w.client.post("/v1/memories", json={"text": f"w{n} fact {i}"}, headers=w.h("t.a"))
            code = r.json()["error"]["code"] if r.status_code >= 400 else None
            with lock:
                codes.append((r.status_code, code, r.headers.get("retry-after")))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = [c for c, _, _ in codes]
    assert statuses.count(201) == 20
    assert sum(1 for _, code, _ in codes if code == "quota_exceeded") == 10
    limited = [ra for _, code, ra in codes if code == "rate_limited"]
    assert len(limited) == 10 and all(ra is not None and int(ra) >= 1 for ra in limited)
    assert len(w.client.get("/v1/memories", headers=w.h("t.a")).json()["items"]) == 20
    worlds.close()
