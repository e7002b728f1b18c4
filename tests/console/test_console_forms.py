"""The console's sessions and forms without a browser (issue 29, OPS-4): hostile form bodies
answer a clear 4xx page, never a 500; a revoked key ends its session; a superadmin's tenant
pick is audited; sessions end when idle or old; the diff of the memory page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.runtime import Runtime
from quipu.surfaces.console.diff import Segment, word_diff
from quipu.surfaces.console.sessions import SessionSigner
from quipu.surfaces.http.server import build_server

FORM = {"content-type": "application/x-www-form-urlencoded"}


@dataclass
class Site:
    client: TestClient
    access: Access
    runtime: Runtime
    keys: dict[str, str]

    def sign_in(self, who: str, tenant: str | None = None) -> str:
        """Sign in; the session's CSRF token."""
        form = self.client.get("/console/sign-in")
        token = _csrf(form.text)
        data = {"csrf": token, "key": self.keys[who], **({"tenant": tenant} if tenant else {})}
        done = self.client.post("/console/sign-in", data=data, follow_redirects=False)
        assert done.status_code == 303, done.text
        return _csrf(self.client.get("/console/search").text)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


@pytest.fixture
def site(tmp_path: Path, remote_embedder: OpenAICompatEmbedder) -> Iterator[Site]:
    settings = load_settings({"database": str(tmp_path / "c.db"), "auth": True}, environ={})
    app, runtime = build_server(settings, remote_embedder)
    access: Access = app.state.access
    access.create_tenant("t")
    access.create_tenant("u")
    keys = {}
    _, keys["admin"] = access.create_key("t", "admin")
    _, keys["root"] = access.create_key("t", "superadmin")
    _, keys["service"] = access.create_key("t", "service")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Site(client, access, runtime, keys)
    runtime.close()


def test_ops_4_hostile_forms_answer_4xx_pages(site: Site) -> None:
    csrf = site.sign_in("admin")
    c = site.client
    made = site.runtime.service.remember(
        site.access.authenticate(site.keys["admin"], surface="http"), "A fact", scope="tenant"
    ).memory
    act = f"/console/memories/{made.id}/forget"
    cases = [
        (f"csrf={csrf}&reason=a%00b", 422, "invalid_text"),  # NUL
        (f"csrf={csrf}&reason=%ED%A0%80", 422, "invalid_form"),  # a lone surrogate, encoded
        (f"csrf={csrf}&reason=%FF%FE", 422, "invalid_form"),  # not UTF-8
        (f"csrf={csrf}&reason=", 422, "reason_required"),
        (f"csrf={csrf}&reason={'x' * 1001}", 422, "invalid_reason"),
        (f"csrf={csrf}&reason=ok&expected_version=99999999999", 422, "invalid_argument"),
        (f"csrf={csrf}&reason=ok&expected_version=-1", 422, "invalid_argument"),
        ("&".join(f"f{i}=1" for i in range(100)) + f"&csrf={csrf}", 422, "invalid_form"),
        (f"csrf={csrf}&reason=" + "x" * 70_000, 413, "payload_too_large"),
    ]
    for body, status, code in cases:
        answer = c.post(act, content=body, headers=FORM)
        assert answer.status_code == status, (body[:60], answer.text[:300])
        assert code in answer.text, (body[:60], answer.text[:300])
    as_json = c.post(act, json={"csrf": csrf, "reason": "x"})
    assert as_json.status_code == 422 and "invalid_form" in as_json.text
    for bad_id in ("a%2Fb", "a%1Fb", "a%00b", "x" * 300):
        answer = c.get(f"/console/memories/{bad_id}")
        assert answer.status_code in (404, 405, 422), (bad_id, answer.status_code)
    assert (
        site.runtime.service.get(
            site.access.authenticate(site.keys["admin"], surface="http"), made.id
        ).version
        == 1
    )  # nothing was forgotten


def test_ops_4_sign_in_needs_its_form_token_and_an_operator_key(site: Site) -> None:
    c = site.client
    no_cookie = c.post("/console/sign-in", data={"csrf": "x", "key": site.keys["admin"]})
    assert no_cookie.status_code == 403
    token = _csrf(c.get("/console/sign-in").text)
    service = c.post("/console/sign-in", data={"csrf": token, "key": site.keys["service"]})
    assert service.status_code == 403 and "console_forbidden" in service.text
    token = _csrf(c.get("/console/sign-in").text)
    root = c.post("/console/sign-in", data={"csrf": token, "key": site.keys["root"]})
    assert root.status_code == 422 and "impersonation_tenant_required" in root.text
    assert "quipu_console" not in c.cookies
    c.cookies.set("quipu_console", "nope", path="/console")
    garbage = c.get("/console/subjects", follow_redirects=False)
    assert garbage.status_code == 303 and garbage.headers["location"].endswith("/sign-in")


def test_ops_4_a_revoked_key_ends_its_console_session(site: Site) -> None:
    site.sign_in("admin")
    assert site.client.get("/console/jobs").status_code == 200
    key_id = site.keys["admin"].split("_")[1]
    site.access.revoke_key("t", key_id)
    after = site.client.get("/console/jobs", follow_redirects=False)
    assert after.status_code == 303 and after.headers["location"].endswith("/sign-in")


def test_ops_4_superadmin_tenant_pick_is_audited(site: Site) -> None:
    csrf = site.sign_in("root", tenant="t")
    root_in = {
        t: site.access.authenticate(site.keys["root"], impersonate=t, surface="http")
        for t in ("t", "u")
    }
    events = site.runtime.governance.audit(root_in["t"])[0]
    signed = [e for e in events if e.action == "console.sign_in"]
    assert signed and signed[0].details == {"tenant": "t", "impersonated": True}
    moved = site.client.post("/console/tenant", data={"csrf": csrf, "tenant": "u"})
    assert moved.status_code == 200 and 'id="tenant">u<' in moved.text
    events = site.runtime.governance.audit(root_in["u"])[0]
    assert [e.action for e in events if e.action.startswith("console.")] == ["console.tenant"]
    missing = site.client.post("/console/tenant", data={"csrf": csrf, "tenant": "nope"})
    assert missing.status_code == 404 and "tenant_not_found" in missing.text


def test_ops_4_sessions_end_when_idle_or_old_and_cannot_be_forged() -> None:
    now = [datetime(2026, 12, 1, tzinfo=UTC)]
    signer = SessionSigner(
        idle=timedelta(minutes=15), lifetime=timedelta(hours=8), clock=lambda: now[0]
    )
    digest = "d" * 64

    def check(cookie: str, key: str = digest) -> bool:
        claimed = SessionSigner.unverified(cookie)
        return claimed is not None and signer.verify(*claimed, key)

    session = signer.begin("k1", None)
    cookie = signer.cookie(session, digest)
    assert check(cookie)
    assert not check(cookie, "e" * 64)  # another key's digest
    forged = SessionSigner.unverified(cookie)
    assert forged is not None
    body = forged[1].replace(forged[1][:4], forged[1][:3] + "A")
    assert not check(f"{body}.{forged[2]}")
    for bad in ("", "x", "a.b.c", "a.b", "x" * 700, "W10.AAAA"):
        assert not check(bad)
    while True:  # kept busy: a request every 14 minutes, re-signed each time
        now[0] += timedelta(minutes=14)
        if not check(cookie):
            break
        session = signer.touched(session)
        cookie = signer.cookie(session, digest)
    assert now[0] - datetime.fromtimestamp(session.began, UTC) > timedelta(hours=8)
    idle = signer.cookie(signer.begin("k1", None), digest)
    now[0] += timedelta(minutes=16)
    assert not check(idle)
    assert SessionSigner.csrf(session, digest) != SessionSigner.csrf(
        signer.begin("k1", None), digest
    )


def test_ops_4_history_diff_is_word_by_word() -> None:
    assert word_diff("u-17 lives in Lyon", "u-17 lives in Marseille") == [
        Segment("same", "u-17 lives in "),
        Segment("removed", "Lyon"),
        Segment("added", "Marseille"),
    ]
    assert word_diff("", "new") == [Segment("added", "new")]


def test_ops_4_resume_names_live_keys_only(site: Site) -> None:
    """A console cookie names a key by id; a run token, a revoked key or an unknown id never
    resumes a session (Access.resume)."""
    from quipu.errors import Unauthorized

    service = site.access.authenticate(site.keys["service"], surface="http")
    token, _ = site.access.mint_run_token(service, "bot", "u-1")
    for key_id in (token.key_id, "nope", ""):
        with pytest.raises(Unauthorized):
            site.access.resume(key_id)
    admin_id = site.keys["admin"].split("_")[1]
    principal, digest = site.access.resume(admin_id)
    assert principal.key_id == admin_id and principal.surface == "console" and len(digest) >= 32
    site.access.revoke_key("t", admin_id)
    with pytest.raises(Unauthorized):
        site.access.resume(admin_id)


def test_ops_4_recall_quantiles_from_histogram_buckets() -> None:
    """The health page's recall p50/p95 (issue 29): Prometheus's histogram_quantile rule,
    linear inside the bucket holding the rank, the highest finite bound in +Inf."""
    from quipu.surfaces.metrics import quantile

    inf = float("inf")
    # 10 recalls: 4 under 10 ms, 5 more under 50 ms, 1 over 1 s
    buckets = [(0.01, 4.0), (0.05, 9.0), (1.0, 9.0), (inf, 10.0)]
    assert quantile(0.5, buckets) == pytest.approx(0.01 + 0.04 * (1 / 5))
    assert quantile(0.95, buckets) == 1.0
    assert quantile(0.2, buckets) == pytest.approx(0.005)
    assert quantile(0.5, [(0.01, 0.0), (inf, 0.0)]) is None
    assert quantile(0.5, []) is None


def test_ops_4_erase_subject_form_refuses_hostile_input_and_queues_nothing(site: Site) -> None:
    """The end-user erasure form (issue 29): NUL, a lone surrogate, an id with a separator, a
    missing reason or confirmation, no CSRF token: each a 4xx page, and no job is queued."""
    csrf = site.sign_in("admin")
    cases = [
        ("user=u-1&reason=r&confirm=u-1", 403, "csrf_refused"),
        (f"csrf={csrf}&user=u-1&reason=a%00b&confirm=u-1", 422, "invalid_text"),
        (f"csrf={csrf}&user=u-1&reason=%ED%A0%80&confirm=u-1", 422, "invalid_form"),
        (f"csrf={csrf}&user=u%1F1&reason=r&confirm=u%1F1", 422, "invalid_id"),
        (f"csrf={csrf}&user=u%001&reason=r&confirm=u%001", 422, "invalid_id"),
        (f"csrf={csrf}&user=u-1&reason=&confirm=u-1", 422, "reason_required"),
        (f"csrf={csrf}&user=u-1&reason=r&confirm=u-2", 422, "confirmation_required"),
    ]
    for body, status, code in cases:
        answer = site.client.post("/console/erase-subject", content=body, headers=FORM)
        assert answer.status_code == status, (body, answer.text[:300])
        assert code in answer.text, (body, answer.text[:300])
    assert site.runtime.queue.store.list_jobs("t", None, 10) == []
    done = site.client.post(
        "/console/erase-subject",
        content=f"csrf={csrf}&user=u-1&reason=asked&confirm=u-1",
        headers=FORM,
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"].endswith("/jobs")
    assert [j.kind for j in site.runtime.queue.store.list_jobs("t", None, 10)] == ["erase_subject"]


def test_ops_4_graph_screens_answer_hostile_input_with_4xx(site: Site) -> None:
    """The entities list and an entity's page (issue 29's graph screens): bad scopes, owners,
    ids, cursors, dates, types and name prefixes answer a 4xx page with a stable code, never a
    500; the name filter is a form with the CSRF check."""
    csrf = site.sign_in("admin")
    c = site.client
    gets = [
        ("/console/entities?scope=nope&owner=a", 422, "invalid_scope"),
        ("/console/entities?scope=user&owner=a%1Fb%1Fc", 422, "invalid_id"),
        ("/console/entities?scope=user&owner=%00", 422, "invalid_id"),
        ("/console/entities?scope=agent_user&owner=solo", 422, "invalid_id"),
        ("/console/entities?scope=user&owner=u&cursor=!!", 422, "invalid_cursor"),
        ("/console/entities?scope=user&owner=u&cursor=" + "A" * 400, 422, "invalid_cursor"),
        ("/console/entities?scope=user&owner=u&type=Bad%20Type", 422, "invalid_name"),
        ("/console/entities/..%2F..?scope=user&owner=u", 404, None),
        ("/console/entities/a%1Fb?scope=user&owner=u", 422, "invalid_id"),
        ("/console/entities/" + "0" * 32 + "?scope=user&owner=u", 404, "not_found"),
        ("/console/entities/" + "0" * 32 + "?scope=user&owner=u&as_of=yesterday", 422, None),
        ("/console/entities/" + "0" * 32 + "?scope=global&owner=g", 403, None),
    ]
    for path, status, code in gets:
        answer = c.get(path)
        assert answer.status_code == status, (path, answer.status_code, answer.text[:300])
        if code is not None:
            assert code in answer.text, (path, answer.text[:300])
    posts = [
        (f"csrf={csrf}&scope=user&owner=u&prefix=a%00b", 422, "invalid_text"),
        (f"csrf={csrf}&scope=user&owner=u&prefix=%ED%A0%80", 422, "invalid_form"),
        (f"csrf={csrf}&scope=user&owner=u&prefix={'p' * 201}", 422, "invalid_prefix"),
        (f"csrf={csrf}&scope=user&owner=u&cursor=%FF", 422, "invalid_form"),
        ("scope=user&owner=u&prefix=a", 403, "csrf_refused"),
    ]
    for body, status, code in posts:
        answer = c.post("/console/entities", content=body, headers=FORM)
        assert answer.status_code == status, (body, answer.status_code, answer.text[:300])
        assert code in answer.text, (body, answer.text[:300])
    ok = c.post(
        "/console/entities", content=f"csrf={csrf}&scope=user&owner=u&prefix=%25", headers=FORM
    )
    assert ok.status_code == 200 and "No entities match" in ok.text
