"""Shared fixtures. Stores are real (a SQLite file in tmp_path; PostgreSQL when the test
script started one), the default embedder is the real bundled model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quipu.client import Quipu
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.service import Limits, MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from tests.support.embedding_server import DIM, EmbeddingServer

BACKENDS = ["sqlite"]


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture
def embedding_server() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    yield server
    server.close()


@pytest.fixture
def remote_embedder(embedding_server: EmbeddingServer) -> Iterator[OpenAICompatEmbedder]:
    embedder = OpenAICompatEmbedder(
        base_url=embedding_server.url, model="bag", dimension=DIM, timeout=5.0
    )
    yield embedder
    embedder.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, tmp_path: Path) -> Iterator[object]:
    opened: list[SQLiteStore] = []

    def make(name: str = "quipu.db") -> SQLiteStore:
        store = SQLiteStore(tmp_path / name)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def alice() -> Principal:
    return Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")


@pytest.fixture
def bob() -> Principal:
    return Principal("t1", "key-bob", Role.AGENT, agent_id="bob", user_id="u-bob")


@pytest.fixture
def other_tenant() -> Principal:
    return Principal("t2", "key-eve", Role.AGENT, agent_id="alice", user_id="u-alice")


@pytest.fixture
def service(make_store, local_embedder: LocalEmbedder) -> MemoryService:  # type: ignore[no-untyped-def]
    return MemoryService(make_store(), local_embedder, Limits())


@pytest.fixture
def mem(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[Quipu]:
    import quipu

    client = quipu.open(tmp_path / "lib.db", embedder=local_embedder)
    yield client
    client.close()
