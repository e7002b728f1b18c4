"""Helpers for tests against the throwaway PostgreSQL server (docs/testing-postgres.md) and the
Citus cluster (docs/scale-out.md, "Testing")."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.conninfo import make_conninfo

#: Shards per distributed table in the contract suite's throwaway schemas: every test makes its
#: own schema, and 32 (Citus's default, what `quipu migrate --citus` gives an operator) costs
#: ~3 s of DDL per schema against ~1.5 s for 4. Routing, co-location and every statement are the
#: same at any shard count; the growth test (test_citus_growth.py) uses the default.
TEST_SHARDS = 4


def new_schema(url: str, schema: str) -> str:
    """Create an empty schema; extensions stay in ``public`` so every schema shares them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema


def drop_schema(url: str, schema: str) -> None:
    """Drop a test schema. Two test processes tearing down on Citus at once can deadlock on
    the shared catalog (seen at session end); the server aborts one drop, which is retried."""
    for attempt in range(5):
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            return
        except psycopg.errors.DeadlockDetected:
            if attempt == 4:
                raise


def schema_url(url: str, schema: str, *settings: str) -> str:
    """``url`` with ``schema`` first on the search path (and ``-c`` ``settings``, if any); a
    ``postgresql://`` URL stays one (the CLI's ``--db`` takes only URLs)."""
    options = " ".join([f"-c search_path={schema},public", *(f"-c {s}" for s in settings)])
    if url.startswith(("postgresql://", "postgres://")) and "options=" not in url:
        return f"{url}{'&' if '?' in url else '?'}options={quote(options)}"
    return make_conninfo(url, options=options)


def citus_schema(coordinator: str, schema: str, shards: int = TEST_SHARDS) -> str:
    """A fresh schema on the Citus coordinator, migrated the way an operator does it
    (``quipu migrate --citus --db URL``, run in-process); returns its connection string."""
    new_schema(coordinator, schema)
    url = schema_url(coordinator, schema, f"citus.shard_count={shards}")
    report = quipu_migrate_citus(url)
    assert "memory_versions" in report["distributed"], report
    return url


def quipu_migrate_citus(url: str) -> dict[str, Any]:
    """Run the CLI command ``quipu migrate --citus --db URL``; its JSON report."""
    from typer.testing import CliRunner

    from quipu.surfaces.cli.app import app

    result = CliRunner().invoke(app, ["migrate", "--citus", "--db", url])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


class CitusSchemas:
    """Throwaway schemas on the Citus coordinator for the contract suite, each migrated once by
    ``quipu migrate --citus`` and handed out again after a reset that leaves it as a fresh
    migration does: every table emptied, the sequences restarted, indexes the test built (a
    scope's ANN index) dropped. That costs ~0.2 s against ~1.8 s for a new distributed schema;
    a schema whose reset fails is dropped instead of reused."""

    def __init__(self, coordinator: str) -> None:
        self.coordinator = coordinator
        self._free: list[str] = []
        self._made: dict[str, tuple[str, frozenset[str]]] = {}  # url -> (schema, base indexes)

    def take(self) -> str:
        if self._free:
            return self._free.pop()
        name = f"c_{uuid.uuid4().hex[:12]}"
        url = citus_schema(self.coordinator, name)
        with psycopg.connect(url) as conn:
            self._made[url] = (name, frozenset(_indexes(conn, name)))
        return url

    def give_back(self, url: str) -> None:
        name, base = self._made[url]
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SET lock_timeout = '10s'")
                for index in sorted(set(_indexes(conn, name)) - base):
                    conn.execute(f'DROP INDEX IF EXISTS "{name}"."{index}"')
                tables = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT tablename FROM pg_tables WHERE schemaname = %s"
                        " AND tablename <> 'schema_migrations' ORDER BY tablename",
                        (name,),
                    )
                ]
                conn.execute("TRUNCATE " + ", ".join(f'"{name}"."{t}"' for t in tables))
                conn.execute(  # Citus refuses ALTER SEQUENCE on audit_seq (a column default)
                    "SELECT setval(format('%%I.%%I', schemaname, sequencename), 1, false)"
                    " FROM pg_sequences WHERE schemaname = %s",
                    (name,),
                )
        except psycopg.Error:
            self._made.pop(url)
            drop_schema(self.coordinator, name)
            return
        self._free.append(url)

    def close(self) -> None:
        for name, _ in self._made.values():
            drop_schema(self.coordinator, name)
        self._made.clear()
        self._free.clear()


def _indexes(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    return [
        str(r[0])
        for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,))
    ]
