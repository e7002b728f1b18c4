"""Docs cannot drift: every CLI command, setting and HTTP route is documented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.main

from quipu.settings import Settings
from quipu.surfaces.cli.app import app

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _commands(group: Any, prefix: str) -> list[str]:
    names = []
    for name, command in group.commands.items():
        full = f"{prefix} {name}"
        if hasattr(command, "commands"):
            names += _commands(command, full)
        else:
            names.append(full)
    return names


def test_api_004_every_cli_command_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    group = typer.main.get_command(app)
    missing = [c for c in _commands(group, "quipu") if f"`{c}" not in text]
    assert missing == []


def test_api_005_every_setting_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text()
    missing = [name for name in Settings.model_fields if f"`{name}`" not in text]
    assert missing == []
    for name, field in Settings.model_fields.items():
        assert field.description, f"setting {name} has no help text"


def test_api_002_every_http_route_is_documented(tmp_path: Path) -> None:
    from quipu.composition import load_settings, local_principal
    from quipu.memories import MemoryService
    from quipu.storage.sqlite.store import SQLiteStore
    from quipu.surfaces.http.app import create_app
    from quipu.surfaces.http.auth import local_resolver

    settings = load_settings({"database": str(tmp_path / "d.db")}, environ={})
    store = SQLiteStore(settings.database)
    api = create_app(MemoryService(store, None), local_resolver(local_principal(settings)))
    text = (DOCS / "http-api.md").read_text()
    missing = []
    for path, methods in api.openapi()["paths"].items():
        for method in methods:
            if f"`{method.upper()} {path}`" not in text:
                missing.append(f"{method.upper()} {path}")
    store.close()
    assert missing == []


def test_readme_starts_with_the_two_commands() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block
