"""``quipu export`` and ``quipu import`` (OPS-2, API-4): the whole store or one tenant, to
stdout / from stdin (or files), progress on stderr, every failure a stable code."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, Any, NoReturn, TypeVar

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from quipu.core.urls import mask_credentials
from quipu.errors import InvalidInput, QuipuError
from quipu.surfaces.cli import target
from quipu.surfaces.cli.options import Config, Db, Output, env_key, fail, settings_or_exit

T = TypeVar("T")
err = Output(stderr=True)
Json = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]


def export_(
    db: Db = None,
    config: Config = None,
    out: Annotated[
        str, typer.Option("--out", "-o", help="File to write (JSON Lines); - for stdout.")
    ] = "-",
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant (default: the whole store).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Export the whole store (or --tenant): tenants, keys (hashed), memories with vectors,
    sessions and the audit log, as JSON Lines on stdout (or --out). Against a server
    (--db http(s)://...), the memories of the key's tenant (an admin key)."""
    from quipu import portability, transfer

    settings = settings_or_exit(db, config, server_ok=True)
    if target.is_server(settings) and tenant is not None:
        fail(InvalidInput("--tenant needs a store: a server exports the key's own tenant"), 2)
    with _output(out) as fh, _progress() as bar:
        task = bar.add_task("exporting", total=None)
        if target.is_server(settings):
            key = env_key()
            client = _open(lambda: target.open_client(settings, key))
            try:
                counts = {
                    "version": sum(1 for _ in transfer.write(fh, _each(client.export(), bar, task)))
                }
            except QuipuError as exc:
                _refused(exc, target.hint(exc, settings, key))
            finally:
                client.close()
        else:
            from quipu.composition import build_store

            store = _open(lambda: build_store(settings))
            try:
                counts = portability.write_export(
                    fh, store, tenant, lambda _kind, _n: bar.advance(task)
                ).read
            except QuipuError as exc:
                _refused(exc, None)
            finally:
                store.close()
    _summary("exported", counts, out, as_json)


def import_(
    file: Annotated[
        str, typer.Argument(help="An export (JSON Lines); - (the default) reads stdin.")
    ] = "-",
    db: Db = None,
    config: Config = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's records.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Import an export: ids, versions, times, vectors, keys, sessions and audit kept;
    records already present are skipped, so re-running adds nothing. A record that is
    malformed or fails a write's screens is reported by line on stderr and left out (a
    version with its whole family); the rest is imported, and the exit code is 1."""
    from quipu import portability
    from quipu.composition import build_service, local_principal

    settings = settings_or_exit(db, config)
    refused: list[portability.Refused] = []
    with _input(file) as fh:
        service = _open(lambda: build_service(settings))
        try:
            with _progress() as bar:
                task = bar.add_task("importing", total=None)
                counts = portability.import_records(
                    service,
                    local_principal(settings, "cli"),
                    fh,
                    tenant_id=tenant,
                    progress=lambda _kind, _n: bar.advance(task),
                    on_refused=refused.append,
                )
        except QuipuError as exc:
            _refused(exc, None)
        except UnicodeDecodeError:
            _refused(InvalidInput(f"{file} is not UTF-8 text", code="invalid_export"), None)
        finally:
            service.store.close()
    reasons = dict(sorted(Counter(r.code for r in refused).items()))
    for row in refused:
        err.print(
            f"[red]refused[/red] line {row.line} ({escape(row.kind)}):"
            f" {escape(row.code)}: {escape(mask_credentials(row.message))}",
            soft_wrap=True,
        )
    extra = {"refused": {"count": len(refused), "by_reason": reasons}} if refused else {}
    _summary("imported", counts.added, file, as_json, extra)
    if refused:
        by = ", ".join(f"{n} {code}" for code, n in reasons.items())
        err.print(f"refused {len(refused)} records ({by}); the rest was imported", soft_wrap=True)
        raise typer.Exit(1)


def _open(make: Callable[[], T]) -> T:
    try:
        return make()
    except QuipuError as exc:
        fail(exc, 2)


def _each(rows: Any, bar: Progress, task: Any) -> Iterator[Any]:
    for row in rows:
        bar.advance(task)
        yield row


def _refused(exc: QuipuError, hint: str | None) -> NoReturn:
    err.print(f"[red]{escape(exc.code)}:[/red] {escape(mask_credentials(exc.message))}")
    if hint:
        err.print(escape(hint))
    raise typer.Exit(1)


@contextmanager
def _output(path: str) -> Iterator[IO[str]]:
    if path == "-":
        yield sys.stdout
        return
    try:
        with Path(path).open("w", encoding="utf-8") as fh:
            yield fh
    except OSError as exc:
        _refused(_file_error(exc, path, "file_unwritable"), None)


@contextmanager
def _input(path: str) -> Iterator[IO[str]]:
    if path == "-":
        yield sys.stdin
        return
    try:
        with Path(path).open(encoding="utf-8") as fh:
            yield fh
    except OSError as exc:
        _refused(_file_error(exc, path, "file_unreadable"), None)


def _file_error(exc: OSError, path: str, code: str) -> InvalidInput:
    if isinstance(exc, FileNotFoundError):
        code = "file_not_found"
    reason = exc.strerror or type(exc).__name__
    return InvalidInput(f"{path}: {reason}", code=code, details={"path": path})


def _summary(
    verb: str,
    counts: dict[str, int],
    where: str,
    as_json: bool,
    extra: dict[str, Any] | None = None,
) -> None:
    """What an export or import did, by record type: on stdout, unless stdout carries the
    exported data (then on stderr)."""
    shown = where if where != "-" else "stdout" if verb == "exported" else "stdin"
    stream = sys.stderr if verb == "exported" and where == "-" else sys.stdout
    if as_json:
        stream.write(json.dumps({verb: counts, "file": shown, **(extra or {})}) + "\n")
        return
    parts = ", ".join(f"{n} {kind}s" for kind, n in sorted(counts.items())) or "nothing"
    stream.write(f"{verb} {parts} ({shown})\n")


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}"),
        TimeElapsedColumn(),
        console=err,
    )
