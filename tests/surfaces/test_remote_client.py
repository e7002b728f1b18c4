"""``quipu.Client``, the HTTP client (issue 3 item 6): one interface with the embedded
``quipu.Quipu``, the same return types for the same calls, and server error envelopes turned
back into the same typed errors with the same codes. Runs against a real uvicorn server."""

from __future__ import annotations

import inspect
import socket
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Request

import quipu
from quipu.composition import load_settings, local_principal
from quipu.core.limits import Limits
from quipu.core.query import Hit, Page, RecallResult
from quipu.core.records import MemoryVersion, Principal, Role, WriteResult
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import (
    Conflict,
    EmbeddingUnavailable,
    InvalidInput,
    LimitExceeded,
    NotFound,
    QuipuError,
    SecretDetected,
    Unauthorized,
    Unavailable,
)
from quipu.guard import Guard
from quipu.memories import MemoryService
from quipu.remote import Client, MemoryClient, Retry, error_from_response, memory_from_dict
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver
from quipu.surfaces.http.deps import PrincipalResolver
from tests.support.live_server import LiveServer


@dataclass
class Remote:
    client: Client
    service: MemoryService
    principal: Principal
    url: str


@contextmanager
def _serve(database: Path, embedder: LocalEmbedder) -> Iterator[Remote]:
    """The HTTP app in local mode (every request is the local principal) on a real server."""
    settings = load_settings({"database": str(database)}, environ={})
    service = MemoryService(SQLiteStore(settings.database), embedder, Limits())
    principal = local_principal(settings, "http")
    server = LiveServer(create_app(service, local_resolver(principal)))
    client = Client(server.url)
    try:
        yield Remote(client, service, principal, server.url)
    finally:
        client.close()
        server.close()
        service.store.close()


@pytest.fixture
def remote(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[Remote]:
    with _serve(tmp_path / "server.db", local_embedder) as served:
        yield served


@pytest.fixture
def embedded(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[quipu.Quipu]:
    client = quipu.open(tmp_path / "embedded.db", embedder=local_embedder)
    yield client
    client.close()


@pytest.fixture(scope="module")
def both(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[tuple[MemoryClient, MemoryClient]]:
    """One server and one embedded store for the error cases, which write nothing."""
    folder = tmp_path_factory.mktemp("errors")
    with (
        _serve(folder / "server.db", local_embedder) as remote,
        quipu.open(folder / "embedded.db", embedder=local_embedder) as embedded,
    ):
        yield remote.client, embedded


def _operations(protocol: type) -> list[str]:
    return sorted(
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(member)
    )


# -- one interface -----------------------------------------------------------------------------
#: Operations of the HTTP clients only: a service key acting for one subject (issue 27).
HTTP_ONLY = {"for_subject"}


def test_api_006_client_and_quipu_expose_the_same_operations() -> None:
    """Issue 27: every operation of the embedded client (sessions, jobs, export included), with
    one typed signature shared by the interface, ``Quipu`` and ``Client``."""
    shared = _operations(MemoryClient)
    assert {"remember", "recall", "get", "list", "history", "revise", "supersede", "forget"} <= set(
        shared
    )
    assert {"session", "get_job", "list_jobs", "export"} <= set(shared)
    client_ops = {n for n, m in vars(Client).items() if not n.startswith("_") and callable(m)}
    assert client_ops == set(shared) | HTTP_ONLY
    for name in shared:
        # Both clients spell out exactly the interface's signature, names, kinds and defaults.
        wanted = inspect.signature(getattr(MemoryClient, name))
        for cls in (Client, quipu.Quipu):
            ours = inspect.signature(getattr(cls, name))
            if name == "session":  # each returns its own SessionClient
                ours = ours.replace(return_annotation=wanted.return_annotation)
            assert ours == wanted, (cls, name)
    for cls in (Client, quipu.Quipu):
        assert hasattr(cls, "__enter__") and hasattr(cls, "__exit__")


def test_api_006_no_public_method_takes_untyped_options() -> None:
    """Issue 27: no ``**options: Any`` on a public method of any client or session."""
    from quipu.async_client import AsyncClient, AsyncRemoteSession
    from quipu.embedded import Session
    from quipu.remote import RemoteSession

    for cls in (quipu.Quipu, Client, AsyncClient, Session, RemoteSession, AsyncRemoteSession):
        for name, member in vars(cls).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            kinds = {p.kind for p in inspect.signature(member).parameters.values()}
            assert inspect.Parameter.VAR_KEYWORD not in kinds, (cls, name)
            assert inspect.Parameter.VAR_POSITIONAL not in kinds, (cls, name)
            hints = typing.get_type_hints(member)
            assert "return" in hints, (cls, name)


def test_api_006_sessions_share_one_signature() -> None:
    from quipu.async_client import AsyncRemoteSession
    from quipu.embedded import Session
    from quipu.remote import RemoteSession, SessionClient

    for name in _operations(SessionClient):
        wanted = inspect.signature(getattr(SessionClient, name))
        for cls in (Session, RemoteSession, AsyncRemoteSession):
            assert inspect.signature(getattr(cls, name)) == wanted, (cls, name)


def test_api_006_async_client_has_the_same_methods_awaited() -> None:
    from quipu.async_client import AsyncClient

    for name in _operations(MemoryClient):
        member = getattr(AsyncClient, name)
        ours, theirs = inspect.signature(member), inspect.signature(getattr(Client, name))
        assert list(ours.parameters.values()) == list(theirs.parameters.values()), name
        if name != "session":  # the session handle is made at once; its methods are awaited
            assert inspect.iscoroutinefunction(member), name
    ours, theirs = inspect.signature(AsyncClient.for_subject), inspect.signature(Client.for_subject)
    assert ours.parameters == theirs.parameters


@pytest.mark.parametrize(
    ("operation", "target"),
    [
        ("remember", MemoryService.remember),
        ("remember_result", MemoryService.remember),
        ("recall", MemoryService.recall),
        ("list", MemoryService.list),
        ("revise", MemoryService.revise),
        ("supersede", MemoryService.supersede),
        ("forget", MemoryService.forget),
        ("set_status", MemoryService.set_status),
    ],
)
def test_api_006_every_client_option_is_one_the_embedded_client_accepts(
    operation: str, target: Callable[..., Any]
) -> None:
    """... and ``Quipu`` forwards its options to the service, which accepts each of them."""
    accepted = set(inspect.signature(target).parameters)
    if "filters" in accepted:  # recall and list take their filters as keywords
        accepted |= set(inspect.signature(Guard.filters).parameters)
    options = [
        p.name
        for p in inspect.signature(getattr(MemoryClient, operation)).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert set(options) <= accepted


def test_api_006_return_annotations_match_the_embedded_client() -> None:
    for name in set(_operations(MemoryClient)) - {"session"}:
        ours = typing.get_type_hints(getattr(Client, name))["return"]
        theirs = typing.get_type_hints(getattr(quipu.Quipu, name))["return"]
        assert ours == theirs, name


def test_api_006_same_calls_give_the_same_types(remote: Remote, embedded: quipu.Quipu) -> None:
    for client in (remote.client, embedded):
        assert isinstance(client, MemoryClient)
        observed = datetime(2025, 3, 1, 14, 0, tzinfo=UTC)
        memory = client.remember(
            "Dana prefers window seats",
            scope="user",
            kind="preference",
            tags=("travel",),
            aliases=["Dana"],
            metadata={"source": "chat"},
            observed_at=observed,
        )
        assert type(memory) is MemoryVersion
        assert memory.observed_at == observed and memory.tags == ("travel",)
        again = client.remember_result("Dana prefers window seats", scope="user")
        assert type(again) is WriteResult and again.created is False
        assert again.memory.id == memory.id

        found = client.recall("where does Dana like to sit?", scope="user", k=3)
        assert type(found) is RecallResult and len(found) == 1
        hit = found.results[0]
        assert type(hit) is Hit and type(hit.memory) is MemoryVersion
        assert hit.memory.id == memory.id and hit.rank == 1 and hit.matched
        assert found.meta["fallback"] is False and found.meta["scope"] == "user"
        assert client.recall("Dana", scope="user").meta["create_safety"] == "exists"

        got = client.get(memory.id)
        assert type(got) is MemoryVersion and got.to_dict() == memory.to_dict()
        page = client.list(scope="user", limit=10, kinds=["preference"])
        assert type(page) is Page and [m.id for m in page.items] == [memory.id]

        revised = client.revise(
            memory.id, "Dana prefers aisle seats", expected_version=1, reason="she said so"
        )
        assert type(revised) is MemoryVersion and revised.version == 2
        newer = client.remember("Dana now flies business class", scope="user")
        old = client.supersede(memory.id, newer.id, reason="upgrade", expected_version=2)
        assert old.status.value == "superseded" and old.related_id == newer.id
        # the supersede stamped the replacing memory with relation `supersedes` (MEM-3): v2
        archived = client.set_status(newer.id, "archived", reason="trip over", expected_version=2)
        assert archived.status.value == "archived"
        forgotten = client.forget(newer.id, reason="asked to")
        assert forgotten.status.value == "unavailable"
        history = client.history(memory.id)
        assert type(history) is list and all(type(v) is MemoryVersion for v in history)
        assert [v.relation.value for v in history] == ["created", "revises", "superseded_by"]
        past = client.recall("window seats", scope="user", as_of=observed + timedelta(days=1))
        assert type(past) is RecallResult


def test_api_006_remote_records_round_trip_exactly(remote: Remote) -> None:
    written = remote.client.remember(
        "The office closes at 18:00 on Fridays",
        kind="fact",
        tags=["office"],
        confidence=0.8,
        valid_at="2025-01-01T00:00:00Z",
        invalid_at=datetime(2030, 1, 1, tzinfo=UTC),
        quote="we close at six on Fridays",
        session_id="s-1",
    )
    stored = remote.service.get(remote.principal, written.id)
    assert written.to_dict() == stored.to_dict()
    assert memory_from_dict(stored.to_dict()).to_dict() == stored.to_dict()
    # The server never discloses tenant or owner; the client says so with empty strings.
    assert written.tenant_id == "" and written.owner == ""


# -- errors ------------------------------------------------------------------------------------
CASES: list[tuple[str, Callable[[MemoryClient, str], object], type[QuipuError], str]] = [
    ("missing id", lambda c, _m: c.get("f" * 32), NotFound, "not_found"),
    ("blank id", lambda c, _m: c.get(""), InvalidInput, "invalid_id"),
    ("blank query", lambda c, _m: c.recall("   "), InvalidInput, "invalid_query"),
    ("long query", lambda c, _m: c.recall("q" * 501), InvalidInput, "query_too_long"),
    ("bad scope", lambda c, _m: c.list(scope="galaxy"), InvalidInput, "invalid_scope"),
    ("bad kind", lambda c, _m: c.remember("x", kind="rumour"), InvalidInput, "invalid_kind"),
    (
        "secret",
        lambda c, _m: c.remember("db password = hunter2hunter2"),
        SecretDetected,
        "secret_detected",
    ),
    ("stale", lambda c, m: c.revise(m, "y", expected_version=7), Conflict, "version_conflict"),
    (
        "self",
        lambda c, m: c.supersede(m, m, expected_version=1),
        InvalidInput,
        "invalid_supersede",
    ),
    (
        "illegal move",
        lambda c, m: c.set_status(m, "candidate", expected_version=1),
        Conflict,
        "illegal_transition",
    ),
]


@pytest.mark.parametrize(("case", "call", "error", "code"), CASES, ids=[c[0] for c in CASES])
def test_api_006_server_errors_are_the_same_typed_errors(
    both: tuple[MemoryClient, MemoryClient],
    case: str,
    call: Callable[[MemoryClient, str], object],
    error: type[QuipuError],
    code: str,
) -> None:
    for client in both:
        memory = client.remember("The lift is out of order")
        with pytest.raises(QuipuError) as raised:
            call(client, memory.id)
        assert type(raised.value) is error, (case, client)
        assert raised.value.code == code and raised.value.message


def test_api_006_the_key_is_sent_as_a_bearer_credential(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    principals = {"Bearer key-a": Principal("t1", "key-a", Role.AGENT, agent_id="a")}

    def resolve(request: Request) -> Principal:
        try:
            return principals[request.headers.get("authorization", "")]
        except KeyError:
            raise Unauthorized("unknown credential") from None

    service = MemoryService(SQLiteStore(tmp_path / "keys.db"), local_embedder, Limits())
    server = LiveServer(create_app(service, PrincipalResolver(resolve, blocking=True)))
    try:
        with Client(server.url, "key-a") as good:
            assert good.remember("Agent a was here").provenance.key_id == "key-a"
        for key in ("key-b", None):
            with Client(server.url + "/", key) as bad, pytest.raises(Unauthorized) as raised:
                bad.list()
            assert raised.value.code == "unauthorized"
        assert "key-a" not in repr(Client(server.url, "key-a"))
    finally:
        server.close()
        service.store.close()


def test_api_006_an_unreachable_server_is_transient() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        Client(f"http://127.0.0.1:{port}", timeout=2, retry=Retry(attempts=0)) as client,
        pytest.raises(Unavailable) as raised,
    ):
        client.recall("anything")
    assert raised.value.code == "server_unreachable" and raised.value.transient


@pytest.mark.parametrize(
    ("status", "body", "headers", "error", "code"),
    [
        (
            429,
            {"error": {"code": "quota_exceeded", "message": "full", "details": {"quota": 1}}},
            {"Retry-After": "3"},
            LimitExceeded,
            "quota_exceeded",
        ),
        (
            503,
            {"error": {"code": "embedder_unavailable", "message": "down", "details": {}}},
            {},
            EmbeddingUnavailable,
            "embedder_unavailable",
        ),
        (
            404,
            {"error": {"code": "secret_detected", "message": "odd", "details": {}}},
            {},
            NotFound,
            "secret_detected",
        ),
        (502, None, {}, Unavailable, "http_502"),
        (500, None, {}, QuipuError, "http_500"),
        (
            418,
            {"error": {"code": "teapot", "message": "short", "details": {}}},
            {},
            QuipuError,
            "teapot",
        ),
    ],
)
def test_api_006_error_envelopes_map_by_code_then_status(
    status: int,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    error: type[QuipuError],
    code: str,
) -> None:
    request = httpx.Request("GET", "http://quipu.test/v1/memories")
    if body is None:
        response = httpx.Response(status, text="<html>gateway</html>", request=request)
    else:
        response = httpx.Response(status, json=body, headers=headers, request=request)
    mapped = error_from_response(response)
    assert type(mapped) is error and mapped.code == code
    if isinstance(mapped, LimitExceeded):
        assert mapped.retry_after == 3.0 and mapped.details == {"quota": 1}
