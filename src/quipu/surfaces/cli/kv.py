"""`quipu kv set|get|list|history|delete`: the key/value plane (KV-1) from the shell, on a
store (a file or a ``postgresql://`` URL), as the trusted local principal. Values are JSON
(``quipu kv set app/theme '{"mode": "dark"}'``); output is the entry as JSON. Errors print
their stable code and exit 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from quipu.errors import InvalidInput, QuipuError
from quipu.surfaces.cli.options import Config, Db, Output, fail, settings_or_exit

if TYPE_CHECKING:
    from quipu.kv import KeyValues

kv = typer.Typer(
    help="Exact key/value entries of one scope: set, get, list, history, delete (KV-1).",
    no_args_is_help=True,
)
err = Output(stderr=True)

Scope = Annotated[str, typer.Option(help="agent, user, agent_user or tenant (one scope).")]
Expected = Annotated[
    int | None,
    typer.Option(help="Compare-and-set: 0 = only if the key holds no value, n = only at v n."),
]
Reason = Annotated[str | None, typer.Option(help="Why (kept in history).")]


def _run(db: str | None, config: Path | None, action: Callable[[KeyValues], Any]) -> None:
    """``action`` on the key/value plane of the store ``--db`` names; prints its JSON."""
    from quipu.composition import build_runtime, build_service, local_principal
    from quipu.kv import KeyValues, KeyValueService

    settings = settings_or_exit(db, config)
    try:
        service = build_service(settings)
        runtime = build_runtime(settings, service)
    except QuipuError as exc:
        fail(exc, 2)
    try:
        plane = KeyValues(KeyValueService(service), local_principal(settings, "cli"))
        result = action(plane)
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2))
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        if exc.details:
            err.print(escape(json.dumps(exc.details, default=str)))
        raise typer.Exit(1) from None
    finally:
        runtime.close()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInput(
            "VALUE must be JSON (quote a string: '\"dark\"')", code="invalid_value"
        ) from None


@kv.command("set")
def set_(
    key: str,
    value: Annotated[str, typer.Argument(help="The value as JSON.")],
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    expected_version: Expected = None,
    reason: Reason = None,
) -> None:
    """Set KEY to the JSON VALUE (a new version)."""
    _run(
        db,
        config,
        lambda p: p.set(
            key, _json(value), scope=scope, expected_version=expected_version, reason=reason
        ).to_dict(),
    )


@kv.command("get")
def get(
    key: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    as_of: Annotated[str | None, typer.Option(help="The value at this time (ISO-8601).")] = None,
) -> None:
    """Print KEY's entry (its value exactly as set)."""
    _run(db, config, lambda p: p.get(key, scope=scope, as_of=as_of).to_dict())


@kv.command("list")
def list_(
    db: Db = None,
    config: Config = None,
    prefix: Annotated[str, typer.Option(help="Keys starting with this.")] = "",
    scope: Scope = "agent",
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the last page.")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size.")] = None,
) -> None:
    """List keys holding a value, by prefix, in byte order."""
    _run(
        db,
        config,
        lambda p: p.list(prefix=prefix, scope=scope, cursor=cursor, limit=limit).to_dict(),
    )


@kv.command("history")
def history(key: str, db: Db = None, config: Config = None, scope: Scope = "agent") -> None:
    """Every version of KEY, oldest first."""
    _run(db, config, lambda p: [e.to_dict() for e in p.history(key, scope=scope)])


@kv.command("delete")
def delete(
    key: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    expected_version: Expected = None,
    reason: Reason = None,
) -> None:
    """Delete KEY (logically; history keeps its values)."""
    _run(
        db,
        config,
        lambda p: p.delete(
            key, scope=scope, expected_version=expected_version, reason=reason
        ).to_dict(),
    )
