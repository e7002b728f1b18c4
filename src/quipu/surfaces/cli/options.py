"""What commands share: the options of a command that opens a store, settings loading, how
an error ends the command (the stable code on stderr, a non-zero exit), and progress bars."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from quipu.composition import load_settings
from quipu.errors import ConfigurationError, QuipuError
from quipu.settings import Settings

err = Console(stderr=True)

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        "--database",
        help="SQLite file or postgresql:// URL (default: setting `database`).",
    ),
]
Config = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
SettingOverrides = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a setting of Quipu's stores, NAME=VALUE (repeatable); default: the "
        "shipped defaults.",
    ),
]


def fail(exc: QuipuError, exit_code: int) -> NoReturn:
    """Print ``code: message`` on stderr and end the command with ``exit_code``."""
    label = "configuration error" if isinstance(exc, ConfigurationError) else exc.code
    err.print(f"[red]{label}:[/red] {exc.message}")
    raise typer.Exit(exit_code)


def settings_or_exit(db: str | None, config: Path | None, **overrides: Any) -> Settings:
    """Settings from defaults, the file, the environment and these flags; exit 2 if invalid."""
    try:
        return load_settings({"database": db, **overrides}, config_file=config)
    except ConfigurationError as exc:
        fail(exc, 2)


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``--set NAME=VALUE`` items as settings overrides, checked against the settings model."""
    overrides: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--set")
        overrides[name.strip()] = value.strip()
    try:
        load_settings(overrides, environ={})
    except ConfigurationError as error:
        raise typer.BadParameter(error.message, param_hint="--set") from None
    return overrides


class Bars:
    """rich progress bars, one per named stage (``start`` then ``advance``): the progress
    callback the benchmark and eval runners take."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def start(self, stage: str, total: int) -> None:
        self._tasks[stage] = self._progress.add_task(stage, total=total)

    def advance(self, stage: str, amount: int) -> None:
        self._progress.advance(self._tasks[stage], amount)
