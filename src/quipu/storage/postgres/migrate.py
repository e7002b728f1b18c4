"""Numbered migrations for the PostgreSQL store, recorded in ``schema_migrations``, and the
optional Citus distribution step (``quipu migrate --citus``).

Concurrent migrators (several server processes starting at once) take turns on an advisory
lock; each migration runs in its own transaction, so a failure leaves the schema at the last
complete version.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from quipu.errors import ConfigurationError

MIGRATIONS_PACKAGE = "quipu.storage.postgres.migrations"
#: pg_advisory_xact_lock key serialising migrators ("quipu" in ASCII).
_LOCK = 0x71756970

#: Citus layout: tables distributed by tenant_id (colocated with memory_versions) and
#: reference tables replicated to every node. ``jobs`` (the work queue) and
#: ``schema_migrations`` stay plain tables on the coordinator.
DISTRIBUTED = (
    "memory_versions",
    "memory_aliases",
    "scope_state",
    "scope_terms",
    "audit_log",
    "session_turns",
    "session_watermarks",
    "model_budget",
    "sessions",
    "session_owners",
    "legal_holds",
    "snapshots",
    "projects",
    "idempotency_keys",
    "kv_entries",
    "documents",
    "doc_chunks",
    "doc_corpora",
    "knowledge_versions",
    "knowledge_state",
    "recall_ledger",
    "recall_references",
    "usage_events",
    "memory_usage",
    "memory_index_versions",
    "index_sweep_marks",
    "graph_entities",
    "graph_aliases",
    "graph_facts",
    "graph_mentions",
    "graph_ontology",
    "graph_placements",
    "consolidation_leases",
    "graph_entity_versions",
    "graph_merges",
    "graph_placed",
    "knowledge_shown",
    "article_candidates",
)
REFERENCE = ("store_meta", "tenant_keys", "tenants", "credentials")


@dataclass(frozen=True)
class MigrationReport:
    applied: list[int]
    distributed: list[str]


def available() -> list[tuple[int, str, str]]:
    """(number, name, sql) for every bundled migration, in order."""
    found = []
    for entry in resources.files(MIGRATIONS_PACKAGE).iterdir():
        name = entry.name
        if not name.endswith(".sql"):
            continue
        number = int(name.split("_", 1)[0])
        found.append((number, name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def pending(conn: psycopg.Connection[Any]) -> list[int]:
    """Bundled migrations not yet applied to this database."""
    exists = conn.execute(
        "SELECT to_regclass(quote_ident(current_schema()) || '.schema_migrations') IS NOT NULL"
    ).fetchone()
    applied: set[int] = set()
    if exists and exists[0]:
        applied = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}
    conn.rollback()
    return [number for number, _, _ in available() if number not in applied]


def migrate(conn: psycopg.Connection[Any], *, citus: bool = False) -> MigrationReport:
    """Apply every migration not yet recorded; with ``citus``, distribute the tables too.

    ``conn`` must not be in autocommit mode; it is left idle (committed) on return.
    """
    done: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
    for number, name, sql in available():
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            if conn.execute(
                "SELECT 1 FROM schema_migrations WHERE version = %s", (number,)
            ).fetchone():
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (number, name)
            )
        done.append(number)
    check_pgvector(conn)
    # Once distributed, a later migration's new tables are distributed by every migrator (a
    # server opening the store included), not only by an explicit `quipu migrate --citus`.
    distributed = distribute(conn) if citus or is_distributed(conn) else []
    return MigrationReport(done, distributed)


def check_pgvector(conn: psycopg.Connection[Any]) -> None:
    """Quipu's search needs pgvector >= 0.8 (iterative index scans)."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    conn.rollback()
    version = tuple(int(p) for p in str(row[0]).split(".")[:2]) if row else (0, 0)
    if version < (0, 8):
        raise ConfigurationError(
            f"pgvector {row[0] if row else '(missing)'} is installed; Quipu needs 0.8 or later"
            " (ALTER EXTENSION vector UPDATE after upgrading the package)"
        )


def has_citus(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
    conn.rollback()
    return row is not None


def is_distributed(conn: psycopg.Connection[Any]) -> bool:
    """Whether this schema's tables are distributed by Citus (``memory_versions`` is)."""
    row = conn.execute(
        "SELECT to_regclass('pg_dist_partition') IS NOT NULL"
        " AND to_regclass(quote_ident(current_schema()) || '.memory_versions') IS NOT NULL"
    ).fetchone()
    found = False
    if row is not None and row[0]:
        found = (
            conn.execute(
                "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass("
                "quote_ident(current_schema()) || '.memory_versions')"
            ).fetchone()
            is not None
        )
    if not conn.autocommit:
        conn.rollback()
    return found


def distribute(conn: psycopg.Connection[Any]) -> list[str]:
    """Make the tenant tables distributed (by ``tenant_id``) and the rest reference tables.

    Idempotent: tables Citus already manages are left alone. Raises ConfigurationError when the
    Citus extension is not installed in this database.
    """
    if not has_citus(conn):
        raise ConfigurationError(
            "--citus needs the Citus extension in this database (CREATE EXTENSION citus on the "
            "coordinator, with worker nodes added); see docs/scale-out.md"
        )
    changed: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        managed = {
            str(r[0])
            for r in conn.execute("SELECT logicalrelid::regclass::text FROM pg_dist_partition")
        }
    for table in REFERENCE:
        if table not in managed:
            with conn.transaction():
                conn.execute("SELECT create_reference_table(%s)", (table,))
            changed.append(table)
    for table in DISTRIBUTED:
        if table not in managed:
            colocate = "default" if table == DISTRIBUTED[0] else DISTRIBUTED[0]
            with conn.transaction():
                conn.execute(
                    "SELECT create_distributed_table(%s, 'tenant_id', colocate_with => %s)",
                    (table, colocate),
                )
            changed.append(table)
    return changed


def _statements(sql: str) -> list[str]:
    """Split a migration file on ';' at line ends (our files keep one statement per block)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]
