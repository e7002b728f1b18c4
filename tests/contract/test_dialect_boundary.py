"""Dialect code lives only in its backend's folder (issue 4): the rest of the package speaks the
Store protocol and never branches on, imports or names a database driver."""

from __future__ import annotations

import re
from pathlib import Path

import quipu

SRC = Path(quipu.__file__).parent

#: What a backend branch or a driver leak looks like in code.
POSTGRES = re.compile(
    r"psycopg|pgvector|quipu\.storage\.postgres|PostgresStore"
    r"|[\"']postgres(?:ql)?(?:://)?[\"']|startswith\(\(?[\"']postgres"
)
SQLITE = re.compile(r"\bimport sqlite3\b|\bsqlite3\.")
BACKEND_CHECK = re.compile(r"capabilities\.backend\s*[!=]=|\bbackend\s*==\s*[\"']")


def _files_outside(*allowed: str) -> list[Path]:
    return [
        p
        for p in sorted(SRC.rglob("*.py"))
        if not any(p.is_relative_to(SRC / a) if a.endswith("/") else p == SRC / a for a in allowed)
    ]


def _hits(pattern: re.Pattern[str], files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if pattern.search(line):
                where = path.relative_to(SRC) if path.is_relative_to(SRC) else path
                found.append(f"{where}:{number}: {line.strip()}")
    return found


def test_postgres_dialect_only_in_its_folder_and_the_composition_root() -> None:
    # evals/tech_errors.py is text, not code: the stack traces a generated developer pastes
    # (issue 31) quote a driver's error messages as they appear in real traces.
    files = _files_outside("storage/postgres/", "composition.py", "evals/tech_errors.py")
    assert files, "the scan found no source files"
    assert _hits(POSTGRES, files) == []


def test_sqlite_dialect_only_in_its_folder() -> None:
    assert _hits(SQLITE, _files_outside("storage/sqlite/")) == []


def test_no_backend_checks_outside_storage() -> None:
    assert _hits(BACKEND_CHECK, _files_outside("storage/")) == []


def test_the_scan_would_catch_a_leak(tmp_path: Path) -> None:
    leak = tmp_path / "leak.py"
    leak.write_text(
        'import psycopg\nif settings.database.startswith(("postgresql://",)):\n    pass\n'
        "if store.capabilities.backend == 'postgres':\n    pass\nimport sqlite3\n"
    )
    assert len(_hits(POSTGRES, [leak])) == 3
    assert len(_hits(BACKEND_CHECK, [leak])) == 1
    assert len(_hits(SQLITE, [leak])) == 1
