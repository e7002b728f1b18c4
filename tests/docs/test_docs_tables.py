"""The docs' tables parse as tables (docs/*.md and the README): a blank line inside one ends it,
so the rows after it render as stray text; and no table names the same thing twice (two rows
for one route drift apart: one of them goes stale)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
#: Pages of measurements, whose tables repeat a first cell by design (a row per run).
MEASURED = {"benchmarks.md"}


def _tables(text: str) -> list[tuple[int, list[str]]]:
    """Each table's first line number and its rows (header and separator included)."""
    tables: list[tuple[int, list[str]]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            continue
        if tables and tables[-1][0] + len(tables[-1][1]) == number:
            tables[-1][1].append(line)
        else:
            tables.append((number, [line]))
    return tables


def _problems(page: Path) -> list[str]:
    found = []
    for start, rows in _tables(page.read_text(encoding="utf-8")):
        where = f"{page.name}:{start}"
        if len(rows) < 2 or not set(rows[1].replace("|", "").strip()) <= set("-: "):
            found.append(f"{where}: rows without a header (a blank line cut a table?)")
            continue
        # reference rows name a route, command or setting in code; a measurement table may
        # repeat its first cell (one row per run)
        keys = [row.split("|")[1].strip() for row in rows[2:]]
        named = [k for k in keys if k.startswith("`") and page.name not in MEASURED]
        twice = sorted({k for k in named if named.count(k) > 1})
        if twice:
            found.append(f"{where}: {', '.join(twice)} more than once")
    return found


def test_every_docs_table_parses_and_names_each_thing_once() -> None:
    problems = [p for page in PAGES for p in _problems(page)]
    assert problems == []


def test_the_check_sees_a_cut_table_and_a_duplicate_row(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "| route | what |\n|---|---|\n| `GET /a` | one |\n\n| `GET /a` | stale |\n"
        "\n| x | y |\n|---|---|\n| `b` | 1 |\n| `b` | 2 |\n| 3 | 1 |\n| 3 | 2 |\n"
    )
    assert _problems(page) == [
        "page.md:5: rows without a header (a blank line cut a table?)",
        "page.md:7: `b` more than once",
    ]
