"""OpenAICompatEmbedder against a small real HTTP server speaking the embeddings protocol."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from quipu.embeddings import Embedder, OpenAICompatEmbedder
from quipu.errors import EmbeddingUnavailable

API_KEY = "sk-test-5f1c9a0b7d2e4c3a"
DIMENSION = 4


def raw_vector(text: str, index: int) -> list[float]:
    """The fake model: a deterministic, deliberately unnormalised vector per text."""
    return [float(len(text) + 1), float(index + 1), 2.0, -1.0]


@dataclass
class Reply:
    """One scripted answer. ``body=None`` means a well-formed answer to the request."""

    status: int = 200
    body: bytes | Callable[[dict[str, Any]], Any] | None = None
    wait_for_release: bool = False


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeEndpoint:
    base_url: str
    replies: list[Reply] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def answer(self, request: dict[str, Any]) -> tuple[int, bytes, bool]:
        reply = self.replies.pop(0) if self.replies else Reply()
        if reply.body is None:
            data = [
                {"object": "embedding", "index": i, "embedding": raw_vector(text, i)}
                for i, text in enumerate(request["input"])
            ]
            body: Any = {"object": "list", "data": data, "model": request["model"]}
        elif callable(reply.body):
            body = reply.body(request)
        else:
            return reply.status, reply.body, reply.wait_for_release
        return reply.status, json.dumps(body).encode(), reply.wait_for_release


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        endpoint = self.server.endpoint
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length))
        endpoint.requests.append(Recorded(self.path, dict(self.headers.items()), request))
        status, body, wait = endpoint.answer(request)
        if wait:
            endpoint.release.wait(timeout=10)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test): nothing to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    endpoint: FakeEndpoint


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    server = _Server(("127.0.0.1", 0), _Handler)
    host, port = server.server_address[:2]
    server.endpoint = FakeEndpoint(base_url=f"http://{host!s}:{port}/v1")
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield server.endpoint
    server.endpoint.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def embedder(endpoint: FakeEndpoint) -> Iterator[OpenAICompatEmbedder]:
    with OpenAICompatEmbedder(
        base_url=endpoint.base_url + "/",
        model="fake-embed-4",
        dimension=DIMENSION,
        api_key=API_KEY,
        timeout=2.0,
    ) as client:
        yield client


def unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    return array / np.linalg.norm(array)


def test_good_response_is_normalised_and_request_is_well_formed(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    texts = ["Dana prefers window seats", "", "naïve 東京"]
    vectors = embedder.embed_batch(texts)
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "openai-compat:fake-embed-4"
    assert embedder.dimension == DIMENSION
    assert vectors.shape == (3, DIMENSION)
    assert vectors.dtype == np.float32
    for row, text in enumerate(texts):
        np.testing.assert_allclose(vectors[row], unit(raw_vector(text, row)), atol=1e-6)
    (request,) = endpoint.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert request.body == {"model": "fake-embed-4", "input": texts, "encoding_format": "float"}


def test_no_api_key_sends_no_authorization_header(endpoint: FakeEndpoint) -> None:
    with OpenAICompatEmbedder(
        base_url=endpoint.base_url, model="fake-embed-4", dimension=DIMENSION
    ) as keyless:
        vector = keyless.embed_one("hello")
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-6)
    assert "Authorization" not in endpoint.requests[0].headers


def test_rows_follow_the_index_field_not_the_answer_order(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    def reversed_answer(request: dict[str, Any]) -> dict[str, Any]:
        data = [
            {"index": i, "embedding": raw_vector(text, i)}
            for i, text in enumerate(request["input"])
        ]
        return {"data": data[::-1]}

    endpoint.replies.append(Reply(body=reversed_answer))
    texts = ["a", "bb", "ccc"]
    vectors = embedder.embed_batch(texts)
    for row, text in enumerate(texts):
        np.testing.assert_allclose(vectors[row], unit(raw_vector(text, row)), atol=1e-6)


def test_texts_are_sent_in_batches_and_reassembled_in_order(endpoint: FakeEndpoint) -> None:
    texts = [f"text number {n}" * (n + 1) for n in range(5)]
    with OpenAICompatEmbedder(
        base_url=endpoint.base_url, model="fake-embed-4", dimension=DIMENSION, batch_size=2
    ) as batched:
        vectors = batched.embed_batch(texts)
    assert [request.body["input"] for request in endpoint.requests] == [
        texts[0:2],
        texts[2:4],
        texts[4:5],
    ]
    for row, text in enumerate(texts):
        np.testing.assert_allclose(vectors[row], unit(raw_vector(text, row % 2)), atol=1e-6)


def test_empty_batch_makes_no_request(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    assert embedder.embed_batch([]).shape == (0, DIMENSION)
    assert endpoint.requests == []


def test_recall_004_wrong_dimension_is_unavailable(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    endpoint.replies.append(Reply(body=lambda _: {"data": [{"index": 0, "embedding": [1.0] * 3}]}))
    with pytest.raises(EmbeddingUnavailable, match="has 3 dimensions, expected 4"):
        embedder.embed_one("hello")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"data": []}, "holds 0 embeddings for 1 texts"),
        ({"data": [{"embedding": [1.0] * 4}, {"embedding": [1.0] * 4}]}, "holds 2 embeddings"),
        ({"error": "nope"}, "no 'data' list"),
        ([1, 2, 3], "no 'data' list"),
        ({"data": ["not an object"]}, r"data\[0\] is not an object"),
        ({"data": [{"index": 0, "embedding": "1,2,3,4"}]}, "is not a list of numbers"),
        ({"data": [{"index": 0, "embedding": [1.0, "2", 3.0, 4.0]}]}, "non-numeric"),
        ({"data": [{"index": 0, "embedding": [1.0, True, 3.0, 4.0]}]}, "non-numeric"),
        ({"data": [{"index": 0, "embedding": [1.0, None, 3.0, 4.0]}]}, "non-numeric"),
        ({"data": [{"index": 0, "embedding": [1.0, float("nan"), 3.0, 4.0]}]}, "non-finite"),
        ({"data": [{"index": 5, "embedding": [1.0] * 4}]}, "bad or repeated index 5"),
        ({"data": [{"index": 0, "embedding": [0.0] * 4}]}, "all-zero vector"),
    ],
)
def test_recall_004_malformed_answers_are_unavailable(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder, answer: Any, reason: str
) -> None:
    endpoint.replies.append(Reply(body=lambda _: answer))
    with pytest.raises(EmbeddingUnavailable, match=reason):
        embedder.embed_one("hello")


def test_repeated_index_is_unavailable(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    answer = {"data": [{"index": 1, "embedding": [1.0] * 4}, {"index": 1, "embedding": [2.0] * 4}]}
    endpoint.replies.append(Reply(body=lambda _: answer))
    with pytest.raises(EmbeddingUnavailable, match="bad or repeated index 1"):
        embedder.embed_batch(["a", "b"])


def test_recall_004_malformed_json_is_unavailable(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    endpoint.replies.append(Reply(body=b'{"data": [{"embedding": [1.0, 2.0'))
    with pytest.raises(EmbeddingUnavailable, match="not valid JSON"):
        embedder.embed_one("hello")


def test_recall_004_server_error_names_the_status_but_never_the_key(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    # A careless server that echoes the credential back: the key must still not leak.
    endpoint.replies.append(Reply(status=500, body=f"internal error for Bearer {API_KEY}".encode()))
    with pytest.raises(EmbeddingUnavailable, match="HTTP 500") as caught:
        embedder.embed_one("hello")
    error = caught.value
    assert error.details["status"] == 500
    assert error.transient
    assert API_KEY not in str(error)
    assert API_KEY not in json.dumps(error.to_dict())
    assert "[redacted]" in str(error)


def test_recall_004_client_error_status_is_unavailable(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    endpoint.replies.append(Reply(status=401, body=b'{"error": {"message": "bad key"}}'))
    with pytest.raises(EmbeddingUnavailable, match="HTTP 401"):
        embedder.embed_one("hello")


def test_recall_004_slow_response_beyond_timeout_is_unavailable(endpoint: FakeEndpoint) -> None:
    endpoint.replies.append(Reply(wait_for_release=True))
    with (
        OpenAICompatEmbedder(
            base_url=endpoint.base_url,
            model="fake-embed-4",
            dimension=DIMENSION,
            api_key=API_KEY,
            timeout=0.2,
        ) as impatient,
        pytest.raises(EmbeddingUnavailable, match=r"timed out after 0\.2s"),
    ):
        impatient.embed_one("hello")
    endpoint.release.set()


def test_recall_004_unreachable_endpoint_is_unavailable() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        OpenAICompatEmbedder(
            base_url=f"http://127.0.0.1:{port}/v1",
            model="fake-embed-4",
            dimension=DIMENSION,
            api_key=API_KEY,
        ) as unreachable,
        pytest.raises(EmbeddingUnavailable, match="request failed") as caught,
    ):
        unreachable.embed_one("hello")
    assert API_KEY not in str(caught.value)


def test_concurrent_calls_share_one_client(
    endpoint: FakeEndpoint, embedder: OpenAICompatEmbedder
) -> None:
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            results[worker] = embedder.embed_batch([f"worker {worker}" * (worker + 1)])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for worker in range(8):
        expected = unit(raw_vector(f"worker {worker}" * (worker + 1), 0))
        np.testing.assert_allclose(results[worker][0], expected, atol=1e-6)


@pytest.mark.parametrize(
    "arguments",
    [
        {"base_url": ""},
        {"model": ""},
        {"dimension": 0},
        {"timeout": 0.0},
        {"batch_size": 0},
    ],
)
def test_invalid_constructor_arguments_are_refused(arguments: dict[str, Any]) -> None:
    settings: dict[str, Any] = {
        "base_url": "http://127.0.0.1:9/v1",
        "model": "fake-embed-4",
        "dimension": DIMENSION,
    }
    with pytest.raises(ValueError):
        OpenAICompatEmbedder(**(settings | arguments))
