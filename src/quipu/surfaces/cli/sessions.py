"""`quipu sessions append|history|promote`: a session's turns from the shell, on a store (a
file or a ``postgresql://`` URL), as the trusted local principal (issue 24). ``append`` takes
the turn's real time (``--observed-at``), so a conversation imported from elsewhere keeps its
dates; output is JSON. Errors print their stable code and exit 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from quipu.errors import QuipuError
from quipu.surfaces.cli.options import Config, Db, Output, fail, settings_or_exit

if TYPE_CHECKING:
    from quipu.core.records import Principal
    from quipu.runtime import Runtime

sessions = typer.Typer(
    help="A session's turns: append one (with the time it was said), read them, promote them.",
    no_args_is_help=True,
)
err = Output(stderr=True)


def _run(db: str | None, config: Path | None, action: Callable[[Runtime, Principal], Any]) -> None:
    """``action`` on the runtime of the store ``--db`` names; prints its JSON."""
    from quipu.composition import build_runtime, build_service, local_principal

    settings = settings_or_exit(db, config)
    try:
        runtime = build_runtime(settings, build_service(settings))
    except QuipuError as exc:
        fail(exc, 2)
    try:
        result = action(runtime, local_principal(settings, "cli"))
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2))
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        if exc.details:
            err.print(escape(json.dumps(exc.details, default=str)))
        raise typer.Exit(1) from None
    finally:
        runtime.close()


@sessions.command("append")
def append(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    role: Annotated[str, typer.Argument(help="user, assistant, system or tool.")],
    content: Annotated[str, typer.Argument(help="What was said.")],
    observed_at: Annotated[
        str | None,
        typer.Option(
            "--observed-at",
            help="When it was said (ISO 8601 with a zone); default now. Promotion dates the "
            "turn's memories with it and resolves 'yesterday' against it.",
        ),
    ] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object kept with the turn.")] = None,
    db: Db = None,
    config: Config = None,
) -> None:
    """Append one turn to a session; prints the turn."""
    meta: Any = None
    if metadata is not None:
        try:
            meta = json.loads(metadata)
        except json.JSONDecodeError:
            err.print("[red]invalid_argument:[/red] --metadata is not JSON")
            raise typer.Exit(1) from None
    _run(
        db,
        config,
        lambda rt, who: rt.sessions.append(
            who, session_id, role, content, metadata=meta, observed_at=observed_at
        ).to_dict(),
    )


@sessions.command("history")
def history(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    after: Annotated[int, typer.Option(help="Only turns after this sequence number.")] = 0,
    limit: Annotated[int | None, typer.Option(help="At most this many turns.")] = None,
    db: Db = None,
    config: Config = None,
) -> None:
    """A session's turns in order, each with its `observed_at`."""
    _run(
        db,
        config,
        lambda rt, who: [
            t.to_dict() for t in rt.sessions.history(who, session_id, after=after, limit=limit)
        ],
    )


@sessions.command("promote")
def promote(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    db: Db = None,
    config: Config = None,
) -> None:
    """Queue the session's promotion (a worker or the embedded worker runs it); prints the
    job."""
    _run(db, config, lambda rt, who: rt.sessions.promote(who, session_id)[0].to_dict())
