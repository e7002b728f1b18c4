"""Helpers for tests against the throwaway PostgreSQL server (docs/testing-postgres.md)."""

from __future__ import annotations

import psycopg


def new_schema(url: str, schema: str) -> str:
    """Create an empty schema; extensions stay in ``public`` so every schema shares them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema


def drop_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
