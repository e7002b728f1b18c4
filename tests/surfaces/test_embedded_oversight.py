"""The embedded client has the HTTP clients' oversight and job-control verbs (issue 22 gap 4,
API-1, SCOPE-8, SAFE-4): ``erasure_job``, ``subjects``, ``oversight_list``,
``oversight_forget``, ``cancel_job`` and ``retry_job``. The same calls, by principals of the
same roles, answer the same result types and the same error codes through ``quipu.Quipu`` on
a runtime as through ``quipu.Client`` against a real server on that runtime."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from quipu import Client
from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.core.records import Principal, Role
from quipu.embedded import Quipu
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import QuipuError
from quipu.runtime import Runtime
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer

#: Who calls, as an HTTP key and as the embedded principal of the same role and ids.
WHO: dict[str, tuple[str, str, dict[str, Any]]] = {
    "admin": ("t", "admin", {"agent_id": "ops", "user_id": "u-ops"}),
    "writer": ("t", "agent", {"agent_id": "a1", "user_id": "u1"}),
    "root": ("t", "superadmin", {}),
    "stranger": ("other", "admin", {"agent_id": "x"}),
}


@pytest.fixture(scope="module")
def both(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[tuple[Callable[[str], Client], Callable[[str], Quipu], Runtime]]:
    folder = tmp_path_factory.mktemp("embedded-oversight")
    config = load_settings({"database": str(folder / "srv.db"), "auth": True}, environ={})
    app, runtime = build_server(config, local_embedder)  # no worker: jobs stay queued
    access: Access = app.state.access
    access.create_tenant("t")
    access.create_tenant("other")
    keys = {
        name: access.create_key(tenant, role, **ids)[1] for name, (tenant, role, ids) in WHO.items()
    }
    server = LiveServer(app)
    clients: list[Client] = []

    def http(name: str) -> Client:
        clients.append(Client(server.url, keys[name], tenant="t" if name == "root" else None))
        return clients[-1]

    def embedded(name: str) -> Quipu:
        tenant, role, ids = WHO[name]
        return Quipu(runtime, Principal(tenant, f"key-{name}", Role(role), **ids))

    yield http, embedded, runtime
    for client in clients:
        client.close()
    server.close()
    runtime.close()


def _outcome(call: Callable[[], Any]) -> str:
    try:
        found = call()
    except QuipuError as exc:
        return f"{type(exc).__name__}:{exc.code}"
    if isinstance(found, tuple):  # (items, next_cursor)
        return f"ok:{type(found[0][0]).__name__ if found[0] else 'empty'}"
    return f"ok:{type(found).__name__}"


def _script(open_as: Callable[[str], Any], tag: str) -> list[tuple[str, str]]:
    """Every new verb by every role, on targets this surface made itself."""
    c = {name: open_as(name) for name in WHO}
    memory = c["writer"].remember(f"The deploy key rotates on Fridays ({tag})")
    session = c["writer"].session(f"trip-{tag}")
    session.append("user", f"I live in Porto and I bake bread ({tag}).")
    job = session.promote()
    erasure = c["admin"].erase_subject(f"u-gone-{tag}", reason="art. 17 request")
    steps: list[tuple[str, Callable[[Any], Any]]] = [
        ("erasure_job", lambda q: q.erasure_job(erasure.job_id)),
        ("erasure_job missing", lambda q: q.erasure_job("nope")),
        ("erasure_job of a promotion", lambda q: q.erasure_job(job.job_id)),
        ("erasure_job bad id", lambda q: q.erasure_job("a/b")),
        ("subjects", lambda q: q.subjects(limit=5)),
        ("oversight_list", lambda q: q.oversight_list(scope="agent", owner="a1", limit=5)),
        ("oversight_list all", lambda q: q.oversight_list(statuses=["active"], limit=5)),
        ("oversight_list bad filter", lambda q: q.oversight_list(as_of="2026-01-01T00:00:00Z")),
        (
            "oversight_list bad owner",
            lambda q: q.oversight_list(scope="agent", owner="a\x1fb\x1fc"),
        ),
        ("oversight_forget missing", lambda q: q.oversight_forget("nope", reason="r")),
        ("retry_job queued", lambda q: q.retry_job(job.job_id)),
        ("cancel_job", lambda q: q.cancel_job(job.job_id)),
        ("cancel_job missing", lambda q: q.cancel_job("nope")),
        ("retry_job", lambda q: q.retry_job(job.job_id)),
        ("oversight_forget", lambda q: q.oversight_forget(memory.id, reason="operator request")),
    ]
    order = ("writer", "stranger", "admin", "root")  # refusals first: they change nothing
    return [
        (f"{name} by {who}", _outcome(functools.partial(step, c[who])))
        for name, step in steps
        for who in order
    ]


def test_api_001_issue22_embedded_oversight_and_job_verbs_answer_as_http(
    both: tuple[Callable[[str], Client], Callable[[str], Quipu], Runtime],
) -> None:
    http, embedded, _ = both
    over_http = _script(http, "h")
    in_process = _script(embedded, "e")
    assert in_process == over_http
    seen = dict(over_http)
    # the roles' rules, as the HTTP clients see them (and so the embedded one)
    assert seen["subjects by admin"] == "Forbidden:forbidden"
    assert seen["subjects by root"] == "ok:SubjectInfo"
    assert seen["erasure_job by stranger"] == "NotFound:not_found"
    assert seen["cancel_job by writer"] == "Forbidden:forbidden"
    assert seen["cancel_job by admin"] == "ok:Job"
    assert seen["oversight_forget by root"] == "ok:MemoryVersion"
