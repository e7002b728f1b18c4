"""The package's shape (issue 21, STYLE "As it grows"): no import circle, imports running one way
(surfaces -> use cases -> retrieval/core -> storage protocol), and modules small enough to read.

Imports are read from the source with :mod:`ast`, so function-level imports and imports under
``if TYPE_CHECKING:`` count exactly like top-level ones: a circle hidden behind either still
fails here."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import quipu

SRC = Path(quipu.__file__).parent
#: Lines a module may hold before it needs a reason below (STYLE: keep modules small).
MAX_LINES = 650
#: Modules over :data:`MAX_LINES`, and why (docs/architecture.md repeats these).
OVERSIZED = {
    # A flat table of pattern rules tried in order; splitting it would hide the order.
    "quipu.extraction.rules",
    # The PostgreSQL store; its search and bulk paths are already apart (search.py, bulk.py).
    "quipu.storage.postgres.store",
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module a dotted import name lands in (``quipu.a.b.c`` -> ``quipu.a.b`` if that
    is the deepest module); None outside the package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> Iterator[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [t if t in MODULES else base for t in targets]
        else:
            continue
        for target in targets:
            owner = _owner(target)
            if owner is not None and owner != module:
                yield owner


GRAPH = {module: set(_imports(module)) for module in MODULES}


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(GRAPH[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def _reaches(module: str, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(t for t in GRAPH[module] if t.startswith(prefixes))


def test_no_import_circle_even_through_function_level_or_type_only_imports() -> None:
    assert _circles() == []


def test_the_checker_sees_function_level_and_type_only_imports() -> None:
    # quipu.surfaces.cli.app imports the server's start-up inside `serve` only, and that
    # imports the HTTP server inside its functions only (issue 23: a light supervisor).
    assert "quipu.surfaces.http.boot" in GRAPH["quipu.surfaces.cli.app"]
    assert "quipu.surfaces.http.server" in GRAPH["quipu.surfaces.http.boot"]


def test_composition_root_builds_without_importing_a_surface() -> None:
    assert _reaches("quipu.composition", ("quipu.surfaces",)) == []


def test_lower_layers_never_import_use_cases_or_surfaces() -> None:
    upper = ("quipu.surfaces", "quipu.memories", "quipu.composition", "quipu.embedded")
    upper += ("quipu.runtime", "quipu.remote", "quipu.guard", "quipu.sessions")
    for module in MODULES:
        if module.startswith(("quipu.core", "quipu.storage", "quipu.retrieval")):
            assert _reaches(module, upper) == [], module


def test_the_recall_pipeline_knows_nothing_of_principals_or_http() -> None:
    assert _reaches("quipu.retrieval.pipeline", ("quipu.auth", "quipu.surfaces")) == []
    source = MODULES["quipu.retrieval.pipeline"].read_text(encoding="utf-8")
    assert "Principal" not in source


def test_modules_stay_small_or_say_why() -> None:
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in MODULES.items()}
    assert sorted(m for m, n in sizes.items() if n > MAX_LINES) == sorted(OVERSIZED)
