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
