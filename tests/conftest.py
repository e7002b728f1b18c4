"""Shared fixtures. Stores are real (a SQLite file in tmp_path; PostgreSQL when the test
script started one), the default embedder is the real bundled model."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embedded import Quipu
from quipu.embeddings.local import LocalEmbedder
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from tests.support.embedding_server import DIM, EmbeddingServer
from tests.support.pg import CitusSchemas

#: Set by scripts/with-testdb.sh (make test) or by hand; see docs/testing-postgres.md.
PG_URL = os.environ.get("QUIPU_TEST_DATABASE_URL") or None
#: A Citus coordinator, set by scripts/with-citus.sh (make test); see docs/scale-out.md.
CITUS_URL = os.environ.get("QUIPU_TEST_CITUS_URL") or None
BACKENDS = (
    ["sqlite"]
    + [pytest.param("postgres", marks=pytest.mark.postgres)] * bool(PG_URL)
    + [pytest.param("citus", marks=pytest.mark.citus)] * bool(CITUS_URL)
)
#: Backends the surface tests serve from (the store contract runs on Citus as well; a surface
#: test there would only repeat it, slower).
SERVER_BACKENDS = ["sqlite"] + [pytest.param("postgres", marks=pytest.mark.postgres)] * bool(PG_URL)


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


@pytest.fixture(scope="session")
def citus_schemas() -> Iterator[CitusSchemas]:
    """Migrated schemas on the Citus coordinator, reset and reused between tests."""
    assert CITUS_URL is not None
    pool = CitusSchemas(CITUS_URL)
    yield pool
    pool.close()


@pytest.fixture
def make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[object]:
    """``make(name)`` opens a store; each name is its own empty database: a SQLite file, or on
    PostgreSQL a fresh schema (dropped after the test), which keeps tests independent and fast;
    on Citus a schema migrated by ``quipu migrate --citus`` (emptied and reused after)."""
    if backend == "postgres":
        yield from _postgres_stores()
        return
    if backend == "citus":
        yield from _citus_stores(request.getfixturevalue("citus_schemas"))
        return
    opened: list[SQLiteStore] = []

    def make(name: str = "quipu.db") -> SQLiteStore:
        store = SQLiteStore(tmp_path / name)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _postgres_stores() -> Iterator[Callable[..., object]]:
    from quipu.storage.postgres.store import PostgresStore
    from tests.support.pg import drop_schema, new_schema

    assert PG_URL is not None
    url = PG_URL
    schemas: dict[str, str] = {}
    stores: list[PostgresStore] = []

    def make(name: str = "quipu.db") -> PostgresStore:
        if name not in schemas:
            schemas[name] = new_schema(url, f"t_{uuid.uuid4().hex[:12]}")
        store = PostgresStore(schema_url(url, schemas[name]), max_connections=4)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()
    for schema in schemas.values():
        drop_schema(url, schema)


def _citus_stores(pool: CitusSchemas) -> Iterator[Callable[..., object]]:
    from quipu.storage.postgres.store import PostgresStore

    urls: dict[str, str] = {}
    stores: list[PostgresStore] = []

    def make(name: str = "quipu.db") -> PostgresStore:
        if name not in urls:
            urls[name] = pool.take()
        store = PostgresStore(urls[name], max_connections=4)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()
    for url in urls.values():
        pool.give_back(url)


def schema_url(url: str, schema: str) -> str:
    from tests.support.pg import schema_url as with_schema

    return with_schema(url, schema)


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
