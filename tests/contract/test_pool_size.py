"""`pg_pool_size` (issue 27, OPS-1): how many connections one process opens to PostgreSQL is a
setting (`QUIPU_PG_POOL_SIZE`), bounded, and reaches the store's pool; under concurrent reads a
process never holds more connections than that."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from quipu.composition import build_store, load_settings
from quipu.errors import ConfigurationError
from tests.conftest import PG_URL, schema_url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    if PG_URL is None:
        pytest.skip("needs the test PostgreSQL server (scripts/with-testdb.sh)")
    from tests.support.pg import drop_schema, new_schema

    schema = new_schema(PG_URL, f"t_pool_{uuid.uuid4().hex[:10]}")
    yield schema_url(PG_URL, schema)
    drop_schema(PG_URL, schema)


@pytest.mark.parametrize("bad", ["0", "513", "eight"])
def test_ops_001_pool_size_is_bounded(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        load_settings({}, environ={"QUIPU_PG_POOL_SIZE": bad})


@pytest.mark.postgres
def test_ops_001_pool_size_caps_the_connections_of_a_process(postgres_url: str) -> None:
    """Eight threads read while the tenants table is locked, so each read holds its connection:
    the process opens no more connections than the pool size (8 with the default)."""
    assert PG_URL is not None
    settings = load_settings({"database": postgres_url}, environ={"QUIPU_PG_POOL_SIZE": "2"})
    assert settings.pg_pool_size == 2
    store = build_store(settings)
    store.list_tenants()  # migrated and warm
    schema = postgres_url.split("search_path%3D", 1)[1].split("%2C", 1)[0]
    with psycopg.connect(PG_URL) as locker, psycopg.connect(PG_URL, autocommit=True) as probe:
        locker.execute(f'LOCK TABLE "{schema}".tenants IN ACCESS EXCLUSIVE MODE')
        threads = [threading.Thread(target=store.list_tenants) for _ in range(8)]
        for t in threads:
            t.start()
        waiting = 0
        for _ in range(100):  # until the reads that got a connection wait on the lock
            row = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ).fetchone()
            waiting = int(row[0]) if row else 0
            if waiting >= 2:
                break
            time.sleep(0.05)
        time.sleep(0.5)  # time for more connections to open, were the pool larger
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
        held = int(row[0]) if row else 0
        locker.rollback()  # release the lock: every read finishes
        for t in threads:
            t.join(timeout=30)
    store.close()
    assert waiting == 2 and held == 2, (waiting, held)
