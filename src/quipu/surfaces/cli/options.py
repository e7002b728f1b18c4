"""Options shared by every command that opens a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        "--database",
        help="SQLite file or postgresql:// URL (default: setting `database`).",
    ),
]
Config = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
