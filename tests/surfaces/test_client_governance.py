"""Issue 22 through the HTTP clients: every governance route of ``quipu serve`` called by a
method of ``quipu.Client`` and, the same scenario, of ``quipu.AsyncClient`` (API-1), against
the real app on a real socket with real keys: erase under a legal hold, subject erasure as a
job, the review queue, review, affirm and refute, restore and merge, snapshots that fail
closed, projects, the audit log, superadmin oversight and job control. Results come back as
the embedded client's types; refusals as the same typed errors and codes."""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
import httpx
import pytest

from quipu import AsyncClient, Client
from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.core.auth import AuditEvent
from quipu.core.governance import Hold, Project, Snapshot, SubjectInfo
from quipu.core.jobs import Job, JobStatus
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Conflict, Forbidden, InvalidInput, NotFound
from quipu.governance import Erased, Resolved
from quipu.runtime import Runtime
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer


@dataclass
class Served:
    url: str
    runtime: Runtime
    keys: dict[str, str]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("gov-clients")
    config = load_settings({"database": str(folder / "srv.db"), "auth": True}, environ={})
    app, runtime = build_server(config, local_embedder)
    access: Access = app.state.access
    access.create_tenant("t")
    access.create_tenant("other")
    keys = {
        "admin": access.create_key("t", "admin", agent_id="ops", user_id="u-ops")[1],
        "writer": access.create_key("t", "agent", agent_id="a1", user_id="u1")[1],
        "reviewer": access.create_key(
            "t", "agent", agent_id="rev", user_id="u-rev", grants={"memory:review"}
        )[1],
        "root": access.create_key("t", "superadmin")[1],
        "stranger": access.create_key("other", "admin", agent_id="x")[1],
    }
    server = LiveServer(app)
    runtime.worker.poll = 0.05
    runtime.worker.start()
    yield Served(server.url, runtime, keys)
    server.close()
    runtime.close()


class Awaited:
    """An :class:`AsyncClient` whose awaited methods a synchronous test calls: each runs on
    the event loop of one anyio blocking portal (a real loop in a real thread)."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Any) -> None:
        self._portal, self._client = portal, client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        if not inspect.iscoroutinefunction(method):  # ``session(id)``: its methods are awaited
            return lambda *args, **kwargs: Awaited(self._portal, method(*args, **kwargs))

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._portal.call(functools.partial(method, *args, **kwargs))

        return call


Opener = Callable[..., Any]


def _scenario(open_client: Opener) -> None:
    tag = uuid.uuid4().hex[:8]
    writer, reviewer, admin = open_client("writer"), open_client("reviewer"), open_client("admin")
    root, stranger = open_client("root", tenant="t"), open_client("stranger")

    # -- the review queue, review, affirm (LIFE-5, MEM-3) --------------------------------------
    peanuts = f"Mira is allergic to peanuts ({tag})"
    cand = writer.remember(peanuts, scope="user", status="candidate")
    assert cand.status.value == "candidate"
    queue = reviewer.review_queue(status="candidate", limit=100)
    assert cand.id in [m.id for m in queue.items]
    with pytest.raises(Forbidden):
        writer.review(cand.id, "activate", reason="my own", expected_version=1)
    with pytest.raises(NotFound):
        stranger.review(cand.id, "activate", reason="foreign", expected_version=1)
    active = reviewer.review(cand.id, "activate", reason="Mira confirmed", expected_version=1)
    assert (active.status.value, active.relation.value, active.version) == ("active", "reviews", 2)
    with pytest.raises(Conflict) as stale:
        reviewer.affirm(cand.id, reason="checked", expected_version=1)
    assert stale.value.code == "version_conflict"
    affirmed = reviewer.affirm(cand.id, reason="checked with her doctor", expected_version=2)
    assert affirmed.provenance.verdict == "affirmed" and affirmed.trust.value == "verified"

    # -- restore and merge (LIFE-7) -----------------------------------------------------------
    writer.revise(cand.id, f"Mira is allergic to tree nuts ({tag})", expected_version=3)
    restored = writer.restore(cand.id, 1, reason="the doctor said peanuts", expected_version=4)
    assert (restored.text, restored.relation.value) == (peanuts, "restores")
    dup = writer.remember(f"Mira: peanut allergy ({tag})", scope="user")
    merged = writer.merge(
        [cand.id, dup.id], f"Mira has a peanut allergy ({tag})", reason="dups", expected_version=5
    )
    assert merged.relation.value == "merges" and merged.version == 6
    assert writer.history(dup.id)[-1].status.value == "superseded"

    # -- refute: withheld from list and recall, kept in history (MEM-3) -----------------------
    oslo = writer.remember(f"Mira lives in Oslo ({tag})", scope="user")
    refuted = reviewer.refute(oslo.id, reason="she moved to Bergen", expected_version=1)
    assert refuted.provenance.verdict == "refuted"
    assert oslo.id not in [m.id for m in writer.list(scope="user", limit=100).items]
    assert writer.history(oslo.id)[0].text == oslo.text

    # -- snapshots (LIFE-8) -------------------------------------------------------------------
    snap = writer.snapshot(ids=[cand.id], label=f"run {tag}")
    assert type(snap) is Snapshot and [(m.id, m.version) for m in snap.members] == [(cand.id, 6)]
    resolved = writer.resolve_snapshot(snap.snapshot_id)
    assert type(resolved) is Resolved
    assert [(m.id, mem.text, why) for m, mem, why in resolved.members] == [
        (cand.id, merged.text, None)
    ]

    # -- legal hold and erase (LIFE-4) --------------------------------------------------------
    hold = admin.hold("memory", cand.id, reason="case 9")
    assert type(hold) is Hold and hold.active and hold.kind.value == "memory"
    with pytest.raises(Conflict) as held:
        admin.erase(cand.id, reason="subject request 42")
    assert held.value.code == "legal_hold"
    with pytest.raises(Forbidden):
        writer.erase(cand.id, reason="not mine to erase")
    assert hold.hold_id in [h.hold_id for h in admin.holds()]
    lifted = admin.release_hold(hold.hold_id, reason="case closed")
    assert not lifted.active and lifted.release_reason == "case closed"
    assert hold.hold_id not in [h.hold_id for h in admin.holds()]
    assert hold.hold_id in [h.hold_id for h in admin.holds(include_released=True)]
    erased = admin.erase(cand.id, reason="subject request 42")
    assert type(erased) is Erased and erased.tombstone.status.value == "erased"
    assert erased.report.families == [cand.id] and erased.report.counts["memory_versions"] == 6
    assert [v.text for v in writer.history(cand.id)] == [""] * 7
    gone = writer.resolve_snapshot(snap.snapshot_id)
    assert [(mem, why) for _, mem, why in gone.members] == [(None, "erased")]

    # -- projects (SCOPE-6) -------------------------------------------------------------------
    project = admin.create_project(f"apollo-{tag}", name="Apollo")
    assert type(project) is Project and project.name == "Apollo"
    assert project.project_id in [p.project_id for p in writer.projects()]
    with pytest.raises(InvalidInput) as unknown:
        writer.remember(f"ships ({tag})", project=f"zeus-{tag}")
    assert unknown.value.code == "invalid_project_id"

    # -- superadmin oversight (SCOPE-8) -------------------------------------------------------
    stray = writer.remember(f"The deploy key rotates on Fridays ({tag})")
    subjects, _ = root.subjects(limit=200)
    assert all(type(s) is SubjectInfo for s in subjects)
    assert ("agent", "a1") in {(s.scope.value, s.owner) for s in subjects}
    page = root.oversight_list(scope="agent", owner="a1", limit=100)
    assert stray.id in [m.id for m in page.items]
    forgot = root.oversight_forget(stray.id, reason="operator request")
    assert forgot.status.value == "unavailable"
    with pytest.raises(Forbidden):
        admin.subjects()

    # -- job control (SAFE-4) -----------------------------------------------------------------
    session = writer.session(f"trip-{tag}")
    session.append("user", "I live in Porto and I work as a baker.")
    job = session.promote()
    with pytest.raises(Forbidden):
        writer.cancel_job(job.job_id)
    with pytest.raises(NotFound):
        stranger.cancel_job(job.job_id)
    cancelled = admin.cancel_job(job.job_id)
    if cancelled.status is JobStatus.CANCELLED:  # the worker may have finished it first
        assert admin.retry_job(job.job_id).status is JobStatus.QUEUED

    # -- subject erasure as a job (LIFE-4) ----------------------------------------------------
    writer.remember(f"u1 drinks green tea ({tag})", scope="user")
    done = admin.erase_subject("u1", reason="art. 17 request", wait=True)
    assert type(done) is Job and done.status is JobStatus.SUCCEEDED, done
    assert done.result["families"] >= 1 and "memory_versions" in done.result["counts"]
    assert admin.erasure_job(done.job_id).status is JobStatus.SUCCEEDED
    assert writer.list(scope="user", limit=100).items == []
    with pytest.raises(InvalidInput):
        admin.erase_subject("u1/../x", reason="bad id")

    # -- every act above is audited with its actor (SAFE-4) -----------------------------------
    events: list[AuditEvent] = []
    cursor = None
    while True:
        found, cursor = admin.audit(cursor=cursor, limit=200)
        events += found
        if cursor is None or len(events) > 5000:
            break
    mine = [e for e in events if e.at >= cand.recorded_at]
    actions = {e.action for e in mine}
    assert {
        "memory.review", "memory.affirm", "memory.refute", "memory.restore", "memory.merge",
        "hold.set", "hold.release", "memory.erase", "snapshot.create", "project.create",
        "oversight.subjects", "oversight.list", "oversight.forget", "job.cancel",
        "subject.erase.request", "subject.erase",
    } <= actions, actions  # fmt: skip
    review = next(e for e in mine if e.action == "memory.review" and cand.id in e.target_ids)
    assert (review.role, review.agent_id, review.user_id) == ("agent", "rev", "u-rev")
    assert all(tag not in (e.reason or "") for e in mine)  # reasons here never quote content
    with pytest.raises(Forbidden):
        writer.audit()


def test_life_004_to_008_every_governance_route_through_the_sync_client(served: Served) -> None:
    opened: list[Client] = []

    def open_client(who: str, tenant: str | None = None) -> Client:
        opened.append(Client(served.url, served.keys[who], tenant=tenant))
        return opened[-1]

    try:
        _scenario(open_client)
    finally:
        for client in opened:
            client.close()


def test_life_004_to_008_every_governance_route_through_the_async_client(
    served: Served,
) -> None:
    with anyio.from_thread.start_blocking_portal() as portal:
        opened: list[AsyncClient] = []

        def open_client(who: str, tenant: str | None = None) -> Awaited:
            client = portal.call(
                functools.partial(AsyncClient, served.url, served.keys[who], tenant=tenant)
            )
            opened.append(client)
            return Awaited(portal, client)

        try:
            _scenario(open_client)
        finally:
            for client in opened:
                portal.call(client.aclose)


def test_api_001_client_ids_are_checked_before_a_request_is_sent(served: Served) -> None:
    """Ids with separators never reach a URL: the client refuses them as the server would."""
    with Client(served.url, served.keys["admin"]) as admin:
        for bad in ("a/b", "..", "x\x00y", "x" * 300):
            calls: list[Callable[[str], Any]] = [
                lambda i: admin.erase(i, reason="x"),
                lambda i: admin.release_hold(i, reason="x"),
                admin.resolve_snapshot,
                admin.erasure_job,
                lambda i: admin.review(i, "activate", reason="x"),
                admin.cancel_job,
            ]
            for call in calls:
                with pytest.raises(InvalidInput):
                    call(bad)


class Recording(httpx.BaseTransport):
    """A real HTTP transport that keeps the URL of every request it sends."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.urls: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_safe_004_issue20_d4_client_reasons_never_enter_a_url(served: Served) -> None:
    """Reasons are audited text (they may name a person or a case): every governance call of
    the client sends them in a body. Superadmin oversight forget used the DELETE route, whose
    reason is a query parameter; the client now uses ``POST .../forget``."""
    why = "case-ZK93 for Ona"
    seen = Recording()
    with (
        Client(served.url, served.keys["writer"]) as writer,
        Client(served.url, served.keys["admin"], transport=seen) as admin,
        Client(served.url, served.keys["root"], tenant="t", transport=seen) as root,
    ):
        one = writer.remember(f"The spare key is under the mat {uuid.uuid4().hex[:6]}")
        two = writer.remember(f"The spare key is in the shed {uuid.uuid4().hex[:6]}")
        assert root.oversight_forget(one.id, reason=why).status.value == "unavailable"
        hold = admin.hold("memory", two.id, reason=why)
        admin.release_hold(hold.hold_id, reason=why)
        admin.erase(two.id, reason=why)
        events, _ = admin.audit(limit=20)
    assert len(seen.urls) == 5
    assert all("ZK93" not in url and "reason" not in url for url in seen.urls), seen.urls
    forget = next(e for e in events if e.action == "oversight.forget")
    assert forget.reason == why and forget.target_ids == (one.id,)
