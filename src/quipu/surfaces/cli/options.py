"""What commands share: the options of a command that opens a store, settings loading, how
an error ends the command (the stable code on stderr, a non-zero exit), keys from the
environment or standard input, and progress bars."""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console, ConsoleDimensions, Group, RenderableType
from rich.markup import escape
from rich.progress import Progress, TaskID
from rich.table import Table
from rich.text import Text

from quipu.core.urls import mask_credentials
from quipu.errors import ConfigurationError, QuipuError

if TYPE_CHECKING:
    from quipu.settings import Settings

#: The width of output that goes to a pipe or a file: rich's default there is 80 columns, which
#: wrapped a table's text column to a few characters in ``quipu list | less``. ``COLUMNS`` in
#: the environment still wins.
PIPED_WIDTH = 240


class Output(Console):
    """A console that, writing to something other than a terminal, is wide enough for a
    table's rows to stay one line each."""

    @property
    def size(self) -> ConsoleDimensions:
        found: ConsoleDimensions = Console.size.fget(self)  # type: ignore[attr-defined]
        if self.is_terminal:
            return found
        # read now, not when the console was made (rich fixes COLUMNS at construction, and
        # these consoles are made at import time)
        columns = os.environ.get("COLUMNS", "")
        return ConsoleDimensions(int(columns) if columns.isdigit() else PIPED_WIDTH, found.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


err = Output(stderr=True)

#: The memory verbs that also run against a Quipu server (``--db http(s)://…``).
SERVER_VERBS = "remember, recall, list, get, history, revise, status, forget and supersede"
#: Longest API key or run token accepted from the environment or standard input.
MAX_KEY_CHARS = 4096

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        "--database",
        help="SQLite file or postgresql:// URL (default: setting `database`); for the memory "
        "verbs also the http(s):// URL of a Quipu server (key in QUIPU_API_KEY).",
    ),
]
Config = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
SettingOverrides = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a setting of Quipu's stores, NAME=VALUE (repeatable); default: the "
        "shipped defaults.",
    ),
]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")


def rows_table(rows: list[dict[str, Any]], columns: list[str], width: int) -> RenderableType:
    """``rows`` as a table whose id columns (``id``, ``*_id``) are never cut (issue 27): they
    never wrap and are as wide as their longest value; other columns wrap. When the terminal
    (``width`` columns) cannot hold the ids and a few characters of each other column, each
    row is printed as ``name: value`` lines instead. Cells are text, never markup."""
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(name)] + [len(r[i]) for r in cells]) for i, name in enumerate(columns)]
    ids = [name == "id" or name.endswith("_id") for name in columns]
    needed = sum(w if is_id else min(w, 8) for w, is_id in zip(widths, ids, strict=True))
    if needed + 3 * len(columns) + 1 > width:
        lines: list[Text] = []
        for row in cells:
            lines += [Text(f"{name}: {value}") for name, value in zip(columns, row, strict=True)]
            lines.append(Text(""))
        return Group(*lines)
    table = Table()
    for name, widest, is_id in zip(columns, widths, ids, strict=True):
        if is_id:
            table.add_column(name, no_wrap=True, min_width=widest, overflow="ignore")
        else:
            table.add_column(name, overflow="fold", min_width=min(widest, 8))
    for row in cells:
        table.add_row(*[Text(value) for value in row])
    return table


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def fail(exc: QuipuError, exit_code: int) -> NoReturn:
    """Print ``code: message`` on stderr and end the command with ``exit_code``. The message
    is printed as text (never as markup) with any credential in it masked."""
    err.print(f"[red]{escape(exc.code)}:[/red] {escape(mask_credentials(exc.message))}")
    raise typer.Exit(exit_code)


def settings_or_exit(
    db: str | None, config: Path | None, *, server_ok: bool = False, **overrides: Any
) -> Settings:
    """Settings from defaults, the file, the environment and these flags; exit 2 if invalid,
    or if ``database`` is a server URL and the command needs a store (not ``server_ok``)."""
    from quipu.composition import database_kind, load_settings

    try:
        settings = load_settings({"database": db, **overrides}, config_file=config)
    except ConfigurationError as exc:
        fail(exc, 2)
    if not server_ok and database_kind(settings.database) == "server":
        fail(
            ConfigurationError(
                "this command needs a store (a file or a postgresql:// URL), and "
                f"{settings.database} is a Quipu server: against a server the CLI runs only "
                f"the memory verbs ({SERVER_VERBS}); run this command where the server's "
                "store is, or use the server's HTTP API"
            ),
            2,
        )
    return settings


def checked_key(value: str | None, source: str) -> str | None:
    """An API key or run token as given (outer whitespace stripped), or None when empty;
    ConfigurationError when it holds what no key holds (space, control or non-ASCII
    characters, a lone surrogate) or is absurdly long. The key itself is never echoed."""
    key = (value or "").strip()
    if not key:
        return None
    if len(key) > MAX_KEY_CHARS or not all("!" <= c <= "~" for c in key):
        raise ConfigurationError(
            f"the key in {source} is not an API key: keys are printable ASCII without spaces, "
            f"at most {MAX_KEY_CHARS} characters"
        )
    return key


def env_key() -> str | None:
    """The key in ``QUIPU_API_KEY`` (checked; exit 2 when malformed), or None."""
    from quipu.composition import API_KEY_ENV, server_key

    try:
        return checked_key(server_key(), API_KEY_ENV)
    except ConfigurationError as exc:
        fail(exc, 2)


def key_or_exit(flag: str | None, from_stdin: bool) -> str:
    """A key for a command that needs one: ``--key-stdin`` reads the first line of standard
    input (a prompt without echo on a terminal), else ``--key`` (warned: a command line is
    visible to every user of the machine), else ``QUIPU_API_KEY``. Exit 2 when none is given."""
    from quipu.composition import API_KEY_ENV, server_key

    try:
        if flag is not None and from_stdin:
            raise ConfigurationError("give the key with --key or with --key-stdin, not both")
        if from_stdin:
            # one bounded line: a stream without a newline is not read to its end
            reader = sys.stdin.readline
            raw = getpass.getpass("key: ") if sys.stdin.isatty() else reader(MAX_KEY_CHARS + 1)
            key = checked_key(raw, "standard input")
        elif flag is not None:
            err.print(
                "[yellow]warning:[/yellow] --key puts the secret where other users of this "
                f"machine can read it (ps, shell history); prefer {API_KEY_ENV} or --key-stdin"
            )
            key = checked_key(flag, "--key")
        else:
            key = checked_key(server_key(), API_KEY_ENV)
    except ConfigurationError as exc:
        fail(exc, 2)
    if key is None:
        fail(ConfigurationError(f"no key given: set {API_KEY_ENV} or pipe it to --key-stdin"), 2)
    return key


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``--set NAME=VALUE`` items as settings overrides, checked against the settings model."""
    from quipu.composition import load_settings
    from quipu.settings import is_secret

    overrides: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--set")
        name, value = name.strip(), value.strip()
        if is_secret(name) or mask_credentials(value) != value:
            raise typer.BadParameter(
                f"{name}: --set takes no credentials (a command line is readable by other "
                "users of this machine, e.g. with ps)",
                param_hint="--set",
            )
        overrides[name] = value
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
