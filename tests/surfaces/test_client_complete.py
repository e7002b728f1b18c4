"""Issue 27, "one client interface, complete, sync and async" (API-1): sessions, jobs and export
through the embedded ``Quipu``, ``quipu.Client`` and ``quipu.AsyncClient`` against a real
``quipu serve --auth`` app on a real socket; a service key acting per subject
(``for_subject``); retries honouring ``Retry-After`` on the server's own rate limit; timeouts.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import quipu
from quipu import AsyncClient, Client, MemoryClient
from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.core.jobs import Job, JobStatus
from quipu.core.sessions import SessionTurn
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Forbidden, InvalidInput, LimitExceeded, NotFound, Unavailable
from quipu.remote import Retry, RunTokens
from quipu.runtime import Runtime
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer

SAID = "I live in Porto and I work as a baker."


@dataclass
class Served:
    url: str
    access: Access
    runtime: Runtime
    keys: dict[str, str]


def _serve(folder: Path, embedder: LocalEmbedder, **settings: Any) -> tuple[Served, LiveServer]:
    config = load_settings(
        {"database": str(folder / "srv.db"), "auth": True, **settings}, environ={}
    )
    app, runtime = build_server(config, embedder)
    access: Access = app.state.access
    access.create_tenant("t")
    keys = {
        "admin": access.create_key("t", "admin", agent_id="ops", user_id="u-ops")[1],
        "service": access.create_key("t", "service")[1],
        "a1": access.create_key("t", "agent", agent_id="a1", user_id="u1")[1],
        "a2": access.create_key("t", "agent", agent_id="a2", user_id="u2")[1],
    }
    server = LiveServer(app)
    return Served(server.url, access, runtime, keys), server


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Served]:
    world, server = _serve(tmp_path_factory.mktemp("complete"), local_embedder)
    world.runtime.worker.poll = 0.05
    world.runtime.worker.start()
    yield world
    server.close()
    world.runtime.close()


# -- sessions, jobs, export on every client ----------------------------------------------------
def _sessions_jobs_export(client: MemoryClient, session_id: str) -> None:
    session = client.session(session_id)
    first = session.append("user", SAID, metadata={"channel": "chat"})
    assert type(first) is SessionTurn and first.seq == 1 and first.metadata == {"channel": "chat"}
    session.append("assistant", "Nice to meet you!")
    turns = session.history()
    assert [(t.seq, t.role) for t in turns] == [(1, "user"), (2, "assistant")]
    assert [t.seq for t in session.history(after=1)] == [2]
    assert [t.seq for t in session.history(limit=1)] == [1]
    with pytest.raises(InvalidInput) as raised:
        session.append("narrator", "hello")
    assert raised.value.code == "invalid_role"

    job = session.promote(wait=True)
    assert type(job) is Job and job.status is JobStatus.SUCCEEDED, job
    assert client.get_job(job.job_id).status is JobStatus.SUCCEEDED
    assert job.job_id in {j.job_id for j in client.list_jobs(status="succeeded", limit=50)}
    found = client.recall("where does the user live", scope="agent_user")
    assert "Porto" in found.results[0].memory.text

    exported = list(client.export())
    promoted = found.results[0].memory
    assert any(m.id == promoted.id and m.text == promoted.text for m, _ in exported)
    assert all(m.tenant_id and m.owner for m, _ in exported)  # lossless: tenant and owner kept
    assert any(vector is not None and vector.shape == (384,) for _, vector in exported)


def test_api_001_sessions_jobs_and_export_through_the_embedded_client(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    with quipu.open(tmp_path / "embedded.db", embedder=local_embedder) as mem:
        _sessions_jobs_export(mem, "trip")


def test_api_001_sessions_jobs_and_export_through_the_http_client(served: Served) -> None:
    with Client(served.url, served.keys["admin"]) as client:
        _sessions_jobs_export(client, "trip-http")
        rows = list(client.export())
        assert {m.id for m, _ in rows} == {
            m.id for m, _ in served.runtime.service.store.export_versions("t")
        }


def test_api_001_async_client_does_the_same_awaited(served: Served) -> None:
    async def main() -> None:
        async with AsyncClient(served.url, served.keys["admin"]) as client:
            session = client.session("trip-async")
            turn = await session.append("user", SAID)
            assert type(turn) is SessionTurn and turn.seq == 1
            await session.append("assistant", "Noted.")
            assert [t.seq for t in await session.history()] == [1, 2]
            job = await session.promote(wait=True)
            assert job.status is JobStatus.SUCCEEDED
            assert (await client.get_job(job.job_id)).job_id == job.job_id
            assert job.job_id in {j.job_id for j in await client.list_jobs()}
            memory = await client.remember("Async clients share the wire module", tags=["x"])
            again = await client.remember_result("Async clients share the wire module")
            assert again.created is False and again.memory.id == memory.id
            hits = await client.recall("which module do clients share?", k=3)
            assert hits.results[0].memory.id == memory.id
            assert (await client.get(memory.id)).text == memory.text
            page = await client.list(tags=["x"])
            assert [m.id for m in page.items] == [memory.id]
            revised = await client.revise(
                memory.id, "Both clients share the wire module", expected_version=1
            )
            assert revised.version == 2
            other = await client.remember("The wire module spells each request once")
            old = await client.supersede(memory.id, other.id, reason="merged", expected_version=2)
            assert old.status.value == "superseded"
            # the supersede stamped the replacing memory `supersedes` (MEM-3): it is at v2
            archived = await client.set_status(other.id, "archived", expected_version=2)
            assert archived.status.value == "archived"
            assert (await client.forget(other.id)).status.value == "unavailable"
            assert len(await client.history(memory.id)) == 3
            ids = {m.id async for m, _ in await client.export()}
            assert memory.id in ids and other.id in ids
            with pytest.raises(NotFound):
                await client.get(other.id)

    anyio.run(main)


def test_api_001_job_reads_show_the_callers_own_jobs_only(served: Served) -> None:
    """GET /v1/jobs/{id}: an agent reads its own promotion as a handle (no payload, lease or
    fencing token); another agent gets 404 as for a missing job; admins see everything."""
    with (
        Client(served.url, served.keys["a1"]) as a1,
        Client(served.url, served.keys["a2"]) as a2,
        Client(served.url, served.keys["admin"]) as admin,
    ):
        session = a1.session("mine")
        session.append("user", SAID)
        session.append("assistant", "ok")
        queued = session.promote()
        assert queued.lease_owner is None and queued.fencing_token == 0 and not queued.tenant_id
        job = session.promote(wait=True)
        assert job.status is JobStatus.SUCCEEDED
        assert job.payload == {} and job.lease_owner is None and job.fencing_token == 0
        with pytest.raises(NotFound):
            a2.get_job(job.job_id)
        full = admin.get_job(job.job_id)
        assert full.tenant_id == "t" and full.idempotency_key and full.fencing_token >= 1
        with pytest.raises(Forbidden):
            a1.list_jobs()
        with pytest.raises(Forbidden):
            a1.export()
        with pytest.raises(NotFound):
            a1.get_job("no-such-job")
    for bad in ("a%2Fb", "x" * 300, "%00"):
        r = httpx.get(
            f"{served.url}/v1/jobs/{bad}",
            headers={"Authorization": f"Bearer {served.keys['a1']}"},
        )
        assert r.status_code in (404, 422), (bad, r.text)
        assert r.json()["error"]["code"] in ("not_found", "invalid_id", "invalid_text")


# -- a service key acting per subject ----------------------------------------------------------
def test_scope_002_for_subject_mints_caches_and_renews_run_tokens(served: Served) -> None:
    with Client(served.url, served.keys["service"]) as service:
        planner = service.for_subject(agent_id="planner", user_id="u-9")
        first = planner.remember("The user is vegetarian", scope="agent_user")
        second = planner.remember("The user flies from Lisbon", scope="agent_user")
        token_id = first.provenance.key_id
        assert token_id and second.provenance.key_id == token_id  # cached: minted once
        same = service.for_subject(agent_id="planner", user_id="u-9")
        assert same.get(first.id).provenance.key_id == token_id
        other = service.for_subject(agent_id="planner", user_id="u-10")
        with pytest.raises(NotFound):
            other.get(first.id)  # another subject's memory looks missing
        assert "qk_" not in repr(planner) and "u-9" in repr(planner)

        served.access.revoke_key("t", token_id)  # a revoked token is replaced once
        third = planner.remember("The user likes aisle seats", scope="agent_user")
        assert third.provenance.key_id not in ("", token_id)
        planner.close()  # shares the service client's connections: closes nothing
        with pytest.raises(NotFound):
            service.get(first.id)  # the service key is its own subject

    async def main() -> None:
        async with AsyncClient(served.url, served.keys["service"]) as aservice:
            runner = aservice.for_subject(agent_id="planner", user_id="u-9")
            hit = (await runner.recall("what does the user eat?", scope="agent_user")).results[0]
            assert hit.memory.id == first.id

    anyio.run(main)


def test_scope_002_run_tokens_are_renewed_before_they_expire() -> None:
    tokens = RunTokens(ttl_seconds=3600)
    subject = ("a", "u")
    now = datetime.now(UTC)
    tokens.keep(subject, "t-long", now + timedelta(hours=1))
    assert tokens.cached(subject) == "t-long"
    tokens.keep(subject, "t-short", now + timedelta(seconds=200))  # < a tenth of its life left
    assert tokens.cached(subject) is None
    assert tokens.mint_body(("a", None)) == {"agent_id": "a", "ttl_seconds": 3600}


# -- retries and timeouts ----------------------------------------------------------------------
class Counting(httpx.HTTPTransport):
    """The real transport, counting what it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


def test_api_001_a_rate_limited_write_is_retried_after_retry_after(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """The server's own write limit (MEM-5): 2 writes/s, burst 1. Without retries the second
    write is a 429 with Retry-After; with them it waits that long and goes through."""
    world, server = _serve(tmp_path, local_embedder, rate_limit_per_second=2, rate_limit_burst=1)
    try:
        with Client(world.url, world.keys["a1"], retry=Retry(attempts=0)) as hasty:
            hasty.remember("first write")
            with pytest.raises(LimitExceeded) as raised:
                hasty.remember("second write")
            assert raised.value.retry_after is not None and raised.value.retry_after > 0
        transport = Counting()
        with Client(world.url, world.keys["a2"], transport=transport) as patient:
            patient.remember("first write")
            started = time.monotonic()
            patient.remember("second write")
            waited = time.monotonic() - started
        assert transport.sent.count("POST /v1/memories") == 3  # refused once, then accepted
        assert waited >= 0.2  # it waited for the bucket (0.5 s per token at 2/s)
    finally:
        server.close()
        world.runtime.close()


Answer = tuple[int, str, dict[str, str]] | Exception
OK: Answer = (200, "", {})


def _respond(answer: Answer) -> httpx.Response:
    if isinstance(answer, Exception):
        raise answer
    status, code, headers = answer
    if status == 200:
        return httpx.Response(200, json={"items": [], "next_cursor": None})
    body = {"error": {"code": code, "message": code, "details": {}}}
    return httpx.Response(status, json=body, headers=headers)


FAST = Retry(attempts=3, backoff=0.001)


@pytest.mark.parametrize(
    ("answers", "sent", "outcome"),
    [
        ([(503, "store_busy", {}), OK], 2, None),
        ([(429, "rate_limited", {"Retry-After": "0.01"}), OK], 2, None),
        ([(503, "store_busy", {})] * 4, 4, Unavailable),
        ([(429, "budget_exhausted", {"Retry-After": "3600"})], 1, LimitExceeded),
        ([(503, "store_busy", {"Retry-After": "nan"}), OK], 2, None),
        ([(422, "invalid_scope", {}), OK], 1, InvalidInput),
        ([httpx.ConnectError("refused"), OK], 2, None),
        ([httpx.ReadTimeout("slow"), OK], 1, Unavailable),
    ],
    ids=["503", "429", "gives-up", "long-wait", "bad-header", "422", "connect", "read-timeout"],
)
def test_api_001_retry_policy(
    answers: list[Answer], sent: int, outcome: type[Exception] | None
) -> None:
    """Which answers are retried and how often, in the loop of each client (httpx's own mock
    transport: no server refuses on demand). A read timeout is not retried: the request may
    have been acted on. A wait over ``max_wait`` (an hourly budget) is not waited out."""
    for kind in ("sync", "async"):
        seen: list[httpx.Request] = []
        pending = list(answers)

        def handle(request: httpx.Request) -> httpx.Response:
            seen.append(request)  # noqa: B023 - runs within this iteration
            return _respond(pending.pop(0))  # noqa: B023

        transport = httpx.MockTransport(handle)
        try:
            if kind == "sync":
                page = Client("http://q.test", "k", retry=FAST, transport=transport).list()
            else:
                aclient = AsyncClient("http://q.test", "k", retry=FAST, transport=transport)
                page = anyio.run(aclient.list)
        except Exception as exc:
            assert outcome is not None and isinstance(exc, outcome), (kind, exc)
        else:
            assert outcome is None and page.items == [], kind
        assert len(seen) == sent, kind
        assert all(r.headers["authorization"] == "Bearer k" for r in seen)


def test_api_001_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)  # accepts connections, never answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with (
            Client(url, timeout=0.3, retry=Retry(attempts=0)) as client,
            pytest.raises(Unavailable) as raised,
        ):
            client.recall("anything")
        assert raised.value.code == "server_timeout" and raised.value.transient

        async def main() -> None:
            async with AsyncClient(url, timeout=0.3, retry=Retry(attempts=0)) as client:
                await client.get("m1")

        with pytest.raises(Unavailable) as araised:
            anyio.run(main)
        assert araised.value.code == "server_timeout"
