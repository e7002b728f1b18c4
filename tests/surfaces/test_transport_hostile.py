"""Hostile requests at the transport, on a real uvicorn server spoken to over raw sockets
(issue 20 defects 1, 3, 9; SAFE-5, SCOPE-1): the credential is checked before a body is read,
a streamed body is cut off at the limit, deep JSON and invalid text are refused before any walk,
huge integers are 4xx, and no answer (not even a 500) costs the client its connection."""

from __future__ import annotations

import http.client
import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from quipu.auth.access import Access
from quipu.composition import load_settings, local_principal
from quipu.core.limits import Limits
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.runtime import Runtime
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.http.app import create_app
from quipu.surfaces.http.auth import local_resolver
from quipu.surfaces.http.server import build_server
from tests.conftest import SERVER_BACKENDS
from tests.support.live_server import LiveServer
from tests.surfaces.databases import fresh_database

CAP = 65_536
#: A hang guard for socket reads, not a speed assertion: a correct server answers at once.
WAIT_S = 15.0


@dataclass
class Live:
    host: str
    port: int
    keys: dict[str, str]
    runtime: Runtime

    def auth(self, who: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}


@pytest.fixture(scope="module", params=SERVER_BACKENDS)
def live(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    local_embedder: LocalEmbedder,
) -> Iterator[Live]:
    """`quipu serve --auth` as built by the composition root, with a 64 KiB body limit."""
    tmp = tmp_path_factory.mktemp("hostile")
    with fresh_database(str(request.param), tmp) as (database, _count):
        settings = load_settings(
            {"database": database, "auth": True, "max_body_bytes": CAP}, environ={}
        )
        app, runtime = build_server(settings, local_embedder)
        access: Access = app.state.access
        access.create_tenant("t")
        keys = {
            "admin": access.create_key("t", "admin", agent_id="a1", user_id="u1")[1],
            "service": access.create_key("t", "service")[1],
        }
        server = LiveServer(app)
        yield Live("127.0.0.1", server.port, keys, runtime)
        server.close()
        runtime.close()


# -- raw HTTP/1.1 over a socket -----------------------------------------------------------------
def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: quipu.test",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: dict[str, Any]


def _read_answer(sock: socket.socket, buffered: bytes = b"") -> Answer:
    data = buffered
    while b"\r\n\r\n" not in data:
        part = sock.recv(65_536)
        assert part, f"the server closed without answering: {data!r}"
        data += part
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        part = sock.recv(65_536)
        assert part, "the server closed mid-answer"
        rest += part
    return Answer(int(lines[0].split()[1]), headers, json.loads(rest[:length]))


def _closed_by_server(sock: socket.socket) -> bool:
    """After its answer the server closed the connection: the rest of the body is never read."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _stream_until_answered(sock: socket.socket, piece: bytes, budget: int) -> tuple[Answer, int]:
    """Send ``piece`` chunks (never the final chunk) until the server answers; the answer and
    how many body bytes were sent."""
    sent = 0
    sock.setblocking(False)
    try:
        while sent < budget:
            try:
                early = sock.recv(65_536)
            except BlockingIOError:
                early = b""
            if early:
                sock.settimeout(WAIT_S)
                return _read_answer(sock, early), sent
            try:
                sock.sendall(_chunk(piece))
            except BlockingIOError:
                pass  # the server stopped reading: its answer is on the way
            except (BrokenPipeError, ConnectionResetError):
                break  # it answered and closed; the answer waits in our receive buffer
            sent += len(piece)
    finally:
        sock.settimeout(WAIT_S)
    return _read_answer(sock), sent


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/recall", "/mcp"])
def test_scope_001_issue20_d1_chunked_body_without_credential_is_401_before_it_is_read(
    live: Live, path: str
) -> None:
    """Only the headers and a first chunk are sent, and the final chunk never: the 401 can
    only come from the headers. The server then closes, so it reads nothing more."""
    with socket.create_connection((live.host, live.port), timeout=WAIT_S) as sock:
        sock.sendall(
            _head(
                "POST",
                path,
                {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            )
        )
        sock.sendall(_chunk(b'{"text": "' + b"a" * 1000))
        answer = _read_answer(sock)
        assert answer.status == 401 and answer.body["error"]["code"] == "unauthorized"
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.headers.get("connection") == "close"
        assert _closed_by_server(sock)


@pytest.mark.parametrize("path", ["/v1/memories", "/mcp"])
def test_safe_005_issue20_d1_chunked_body_over_the_limit_is_413_at_the_limit(
    live: Live, path: str
) -> None:
    """An authenticated chunked body that never ends: 413 as soon as the count passes the
    limit (not when the stream ends, nor at the MCP SDK's own 4 MiB), then the connection
    closes."""
    with socket.create_connection((live.host, live.port), timeout=WAIT_S) as sock:
        sock.sendall(
            _head(
                "POST",
                path,
                {
                    **live.auth(),
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    "Transfer-Encoding": "chunked",
                },
            )
        )
        answer, _sent = _stream_until_answered(sock, b"a" * 8192, budget=32 * CAP)
        assert answer.status == 413, answer.body
        assert answer.body["error"] == {
            "code": "payload_too_large",
            "message": f"request bodies are limited to {CAP} bytes",
            "details": {"limit_bytes": CAP},
        }
        assert answer.headers.get("connection") == "close"
        assert _closed_by_server(sock)


def test_safe_005_issue20_d1_declared_length_over_the_limit_is_413_unread(live: Live) -> None:
    with socket.create_connection((live.host, live.port), timeout=WAIT_S) as sock:
        sock.sendall(
            _head(
                "POST",
                "/v1/memories",
                {"Content-Type": "application/json", "Content-Length": str(10 * CAP)},
            )
        )
        answer = _read_answer(sock)
        assert answer.status == 413 and answer.body["error"]["code"] == "payload_too_large"
        assert _closed_by_server(sock)


def test_scope_001_a_refused_small_body_keeps_the_connection(live: Live) -> None:
    """A wrong credential on a body declared within the limit: 401, and the connection stays
    usable (the server drains those few bytes)."""
    conn = http.client.HTTPConnection(live.host, live.port, timeout=WAIT_S)
    body = json.dumps({"text": "hello"})
    conn.request("POST", "/v1/memories", body, {"Content-Type": "application/json"})
    first = conn.getresponse()
    assert first.status == 401 and json.loads(first.read())["error"]["code"] == "unauthorized"
    sock = conn.sock
    conn.request("GET", "/healthz")
    second = conn.getresponse()
    assert second.status == 200 and second.read() and conn.sock is sock
    conn.close()


# -- issue 20 defect 9: huge integers -----------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "who", "payload", "code"),
    [
        ("GET", "/v1/audit?cursor=9223372036854775808", "admin", None, "invalid_cursor"),
        ("GET", "/v1/audit?cursor=99999999999999999999999999", "admin", None, "invalid_cursor"),
        ("GET", "/v1/audit?cursor=%C2%B2", "admin", None, "invalid_cursor"),
        (
            "POST",
            "/v1/tokens",
            "service",
            {"agent_id": "x", "ttl_seconds": 9714838460313728},
            "invalid_ttl",
        ),
        (
            "POST",
            "/v1/tokens",
            "service",
            {"agent_id": "x", "ttl_seconds": -(10**30)},
            "invalid_ttl",
        ),
    ],
)
def test_safe_005_issue20_d9_huge_integers_are_4xx_and_keep_the_connection(
    live: Live, method: str, path: str, who: str, payload: object, code: str
) -> None:
    conn = http.client.HTTPConnection(live.host, live.port, timeout=WAIT_S)
    body = None if payload is None else json.dumps(payload)
    conn.request(method, path, body, {**live.auth(who), "Content-Type": "application/json"})
    answer = conn.getresponse()
    assert answer.status == 422, answer.read()
    assert json.loads(answer.read())["error"]["code"] == code
    sock = conn.sock
    conn.request("GET", "/healthz")
    again = conn.getresponse()
    assert again.status == 200 and again.read() and conn.sock is sock
    conn.close()


# -- issue 20 defect 3: an unexpected error neither stalls the loop nor resets the connection --
def _recurse(depth: int) -> int:
    return 1 + _recurse(depth + 1)


def test_safe_005_issue20_d3_a_500_is_logged_as_a_bounded_summary_and_keeps_the_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A RecursionError (a thousand frames) in an endpoint: 500 in the envelope, one log
    record without ``exc_info`` (a rendered thousand-frame traceback stalled the event loop
    15-20 s), nothing from uvicorn, and the connection is still usable."""
    settings = load_settings({"database": str(tmp_path / "e.db")}, environ={})
    service = MemoryService(SQLiteStore(settings.database), None, Limits())
    app = create_app(service, local_resolver(local_principal(settings, "http")))

    @app.get("/v1/explode")
    def explode() -> int:
        return _recurse(0)

    server = LiveServer(app)
    try:
        with caplog.at_level(logging.INFO):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
            conn.request("GET", "/v1/explode")
            failed = conn.getresponse()
            assert failed.status == 500
            assert json.loads(failed.read())["error"]["code"] == "internal_error"
            sock = conn.sock
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == 200 and conn.sock is sock
            conn.close()
    finally:
        server.close()
        service.store.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage()[:200] for r in errors]
    record = errors[0]
    assert record.name == "quipu.http" and record.exc_info is None
    message = record.getMessage()
    assert "RecursionError" in message and "GET /v1/explode" in message
    assert "frames omitted" in message and len(message.splitlines()) < 30


def _drained_then_closed(sock: socket.socket) -> bool:
    """The answer's body is read to its end, then the server closes (a timeout: it kept the
    connection open, waiting for the rest of the stream)."""
    try:
        while sock.recv(65_536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def _read_any(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """The status and headers of an answer of any kind (JSON, HTML, a redirect)."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65_536)
        assert part, f"the server closed without answering: {data!r}"
        data += part
    lines = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/no-such-page"),
        ("POST", "/healthz"),
        ("POST", "/mcp/"),
        ("POST", "/console/no-such-page"),
        ("POST", "/console/sign-in"),
        ("PUT", "/docs"),
    ],
)
def test_safe_005_a_body_outside_the_api_is_never_read_to_its_end(
    live: Live, method: str, path: str
) -> None:
    """An unauthenticated chunked body that never ends, sent to a page outside /v1 and /mcp:
    answered (404, 405, a redirect, a console page, or 413 at the limit when the page reads
    it) with Connection: close, then the connection closes: the stream is never drained."""
    with socket.create_connection((live.host, live.port), timeout=WAIT_S) as sock:
        sock.sendall(
            _head(method, path, {"Content-Type": "text/plain", "Transfer-Encoding": "chunked"})
        )
        sock.sendall(_chunk(b"a" * 1000))
        sent = 1000
        sock.setblocking(False)
        try:
            while sent < 64 * CAP:
                try:
                    if sock.recv(1, socket.MSG_PEEK):
                        break  # the answer has begun
                except BlockingIOError:
                    pass
                try:
                    sock.sendall(_chunk(b"a" * 8192))
                    sent += 8192
                except BlockingIOError:
                    break  # the server stopped reading
                except (BrokenPipeError, ConnectionResetError):
                    break
        finally:
            sock.settimeout(WAIT_S)
        status, headers = _read_any(sock)
        assert 300 <= status < 500, status
        assert headers.get("connection") == "close", (status, headers)
        assert _drained_then_closed(sock)  # the rest of the stream is never read
