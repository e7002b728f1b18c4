"""A fresh database per backend for the hostile-input tests of the surfaces, with a row
counter that reads outside the service (to prove a refused request wrote nothing)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from tests.conftest import PG_URL


@contextmanager
def fresh_database(backend: str, tmp: Path) -> Iterator[tuple[str, Callable[[str], int]]]:
    """A fresh database (a SQLite file, or a PostgreSQL schema) and a row counter for it."""
    if backend == "sqlite":
        db = tmp / "fuzz.db"
        conn = sqlite3.connect(db, check_same_thread=False)
        try:
            yield str(db), lambda t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
        finally:
            conn.close()
        return
    import psycopg

    from tests.support.pg import drop_schema, new_schema

    assert PG_URL is not None
    schema = new_schema(PG_URL, f"fuzz_{uuid.uuid4().hex[:12]}")
    joiner = "&" if "?" in PG_URL else "?"
    url = f"{PG_URL}{joiner}options={quote(f'-c search_path={schema},public')}"
    pg = psycopg.connect(url, autocommit=True)
    try:

        def count(table: str) -> int:
            found = pg.execute(f"SELECT count(*) FROM {table}").fetchone()
            return int(found[0]) if found else 0

        yield url, count
    finally:
        pg.close()
        drop_schema(PG_URL, schema)
