"""Numbered migrations for the SQLite store, recorded in ``schema_migrations``."""

from __future__ import annotations

import sqlite3
import time
from importlib import resources

MIGRATIONS_PACKAGE = "quipu.storage.sqlite.migrations"


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


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply every migration not yet recorded, each in its own transaction. Returns the new ones."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    done = []
    for number, name, sql in available():
        if number in applied:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (number,)
            ).fetchone():
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (number, name, int(time.time() * 1_000_000)),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        done.append(number)
    return done


def _statements(sql: str) -> list[str]:
    """Split a migration file on ';' at line ends (our files keep one statement per block)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]
