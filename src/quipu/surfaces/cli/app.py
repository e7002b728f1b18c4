"""The ``quipu`` command line (API-4): serve, the memory verbs on a local store or a Quipu
server (``--db http(s)://…``, see :mod:`.target`), export/import, config and bench. Errors
print their stable code and exit non-zero; ``--json`` prints the same JSON the HTTP API
returns."""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from quipu.core.urls import mask_credentials
from quipu.errors import QuipuError
from quipu.surfaces.cli import (
    access,
    bench,
    bench_planes,  # noqa: F401  (adds its commands to bench.app)
    bench_scale,  # noqa: F401  (adds its command to bench.app)
    governance,
    jobs,
    portable,
    target,
)
from quipu.surfaces.cli import articles as articles_cli
from quipu.surfaces.cli import documents as documents_cli
from quipu.surfaces.cli import eval as eval_cli
from quipu.surfaces.cli import graph as graph_cli
from quipu.surfaces.cli import kv as kv_cli
from quipu.surfaces.cli import sessions as sessions_cli
from quipu.surfaces.cli.options import (
    Config,
    Db,
    Output,
    env_key,
    fail,
    rows_table,
    settings_or_exit,
)

if TYPE_CHECKING:
    from quipu.memories import MemoryService
    from quipu.remote import MemoryClient
    from quipu.settings import Settings

# Plain help (issue 27, `quipu --help` under 0.5 s): typer's rich help imports rich.markdown
# and markdown-it and draws panels, about 0.3-0.5 s of each `--help` on this machine.
app = typer.Typer(
    help="Quipu: memory for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(bench.app, name="bench")
app.add_typer(access.tenants, name="tenants")
app.add_typer(access.keys, name="keys")
app.add_typer(access.tokens, name="tokens")
app.add_typer(jobs.jobs, name="jobs")
app.add_typer(eval_cli.app, name="eval")
app.add_typer(kv_cli.kv, name="kv")
app.add_typer(documents_cli.documents, name="documents")
app.add_typer(articles_cli.articles, name="articles")
app.add_typer(graph_cli.graph, name="graph")
app.add_typer(sessions_cli.sessions, name="sessions")
app.command("search")(documents_cli.search_all)
app.command()(jobs.worker)
app.command("export")(portable.export_)
app.command("import")(portable.import_)
governance.register(app)
console = Output()
err = Output(stderr=True)
T = TypeVar("T")

Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
ScopeOpt = Annotated[str, typer.Option("--scope", help="agent, user, agent_user or tenant.")]


_settings = settings_or_exit


def _run(db: str | None, config: Path | None, action: Callable[[MemoryService, Settings], T]) -> T:
    """``action`` on the service of a local store (commands a server cannot serve)."""
    from quipu.composition import build_service

    settings = _settings(db, config)
    try:
        service = build_service(settings)
    except QuipuError as exc:
        fail(exc, 2)
    try:
        return action(service, settings)
    except QuipuError as exc:
        _refused(exc, None)
    finally:
        service.store.close()


def _memories(db: str | None, config: Path | None, action: Callable[[MemoryClient], T]) -> T:
    """``action`` on the memories ``database`` names: a local store, as the local principal,
    or a Quipu server, with the key in QUIPU_API_KEY (issue 20 defect 15)."""
    settings = _settings(db, config, server_ok=True)
    key = env_key() if target.is_server(settings) else None
    try:
        client = target.open_client(settings, key)
    except QuipuError as exc:
        fail(exc, 2)
    try:
        return action(client)
    except QuipuError as exc:
        _refused(exc, target.hint(exc, settings, key))
    finally:
        client.close()


def _refused(exc: QuipuError, hint: str | None) -> NoReturn:
    """Print an error of the request (code, message, details, a hint) and exit 1."""
    err.print(f"[red]{escape(exc.code)}:[/red] {escape(mask_credentials(exc.message))}")
    if exc.details:
        err.print(escape(json.dumps(exc.details, default=str)))
    if hint:
        err.print(escape(hint))
    raise typer.Exit(1)


def _print(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    else:
        render(data)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    console.print(rows_table(rows, columns, console.width))


@app.command()
def serve(
    db: Db = None,
    config: Config = None,
    host: Annotated[str | None, typer.Option(help="Bind address.")] = None,
    port: Annotated[int | None, typer.Option(help="Port.")] = None,
    auth: Annotated[
        bool | None, typer.Option("--auth/--no-auth", help="Require API keys (multi-tenant).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Worker processes (each loads the embedding model).")
    ] = None,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs) on the configured store."""
    from quipu.composition import hand_to_workers, serve_settings
    from quipu.surfaces.http.boot import WORKER_FACTORY, build_app, prepare
    from quipu.surfaces.http.logs import configure_logging

    settings = serve_settings(
        _settings(db, config, host=host, port=port, auth=auth, workers=workers)
    )
    processes_count = settings.workers or 1
    if not settings.auth and not _is_loopback(settings.host):
        err.print(
            f"[red]refusing to bind {settings.host}:[/red] without authentication the server acts "
            "as the local principal; bind 127.0.0.1, or start with --auth (API keys required)"
        )
        raise typer.Exit(2)
    logging_config = configure_logging(settings.log_level, settings.log_format)
    try:
        # With several workers this process only readies the store: each worker builds its
        # own server (surfaces.http.boot), so building one here too only delayed the start.
        if processes_count > 1:
            runtime = None
            has_tenants = prepare(settings)
        else:
            api, runtime = build_app(settings)
            has_tenants = bool(runtime.service.store.list_tenants()) if settings.auth else True
    except QuipuError as exc:
        fail(exc, 2)
    url = f"http://{settings.host}:{settings.port}"
    shown = mask_credentials(settings.database)  # the DSN's password stays off the screen
    mode = "API keys required" if settings.auth else "local principal, no authentication"
    processes = f", {processes_count} worker processes" if processes_count > 1 else ""
    console.print(
        f"Quipu {shown} on {url} ({mode}{processes}); OpenAPI docs: {url}/docs",
        markup=False,
    )
    if not has_tenants:
        console.print(
            "No tenants or keys yet. Create the first admin key (shown once):\n"
            f"  quipu tenants create acme --db {shown}\n"
            f"  quipu keys create --tenant acme --role admin --db {shown}",
            markup=False,
        )
    if runtime is None:
        # The store is migrated; each worker process builds its own server from the same
        # settings (surfaces.http.boot.app_from_environment).
        from quipu.surfaces.http.workers import run_workers, share_metrics

        hand_to_workers(settings)
        with share_metrics():
            started = run_workers(
                WORKER_FACTORY,
                workers=processes_count,
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level,
                log_format=settings.log_format,
            )
        if not started:
            err.print("[red]a worker could not start[/red] (its error is logged above)")
            raise typer.Exit(2)
        return
    import uvicorn

    if settings.worker_embedded:
        runtime.worker.start()
    try:
        uvicorn.run(api, host=settings.host, port=settings.port, log_config=logging_config)
    finally:
        runtime.close()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command("mcp")
def mcp_(db: Db = None, config: Config = None) -> None:
    """Run the MCP server over stdio for a local agent, as the trusted local principal."""
    from quipu.composition import build_runtime, build_service, local_principal
    from quipu.surfaces.http.logs import configure_logging
    from quipu.surfaces.mcp import create_mcp_server, fixed_principal

    settings = _settings(db, config)
    configure_logging(settings.log_level, settings.log_format)  # stderr; stdout is the protocol
    try:
        service = build_service(settings)
        runtime = build_runtime(settings, service)
    except QuipuError as exc:
        fail(exc, 2)
    principal = local_principal(settings, "mcp")
    server = create_mcp_server(
        service,
        fixed_principal(principal),
        log_level="DEBUG" if settings.log_level == "debug" else "WARNING",
        sessions=runtime.sessions,
        governance=runtime.governance,
        index=runtime.index,
        harvest=runtime.harvest,
    )
    if settings.worker_embedded:
        runtime.worker.start()
    # stdout carries the protocol: nothing else may print there (logs go to stderr).
    try:
        server.run("stdio")
    finally:
        runtime.close()


@app.command()
def remember(
    text: str,
    db: Db = None,
    config: Config = None,
    scope: ScopeOpt = "agent",
    kind: Annotated[str, typer.Option(help="fact, preference, decision, ...")] = "fact",
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    alias: Annotated[list[str] | None, typer.Option(help="An alias (repeatable).")] = None,
    project: Annotated[str | None, typer.Option(help="Project partition.")] = None,
    observed_at: Annotated[str | None, typer.Option(help="When it was said (ISO-8601).")] = None,
    valid_at: Annotated[str | None, typer.Option(help="When it became true.")] = None,
    invalid_at: Annotated[str | None, typer.Option(help="When it stops being true.")] = None,
    as_json: Json = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the memory's id (for scripts).")
    ] = False,
) -> None:
    """Remember TEXT."""
    result = _memories(
        db,
        config,
        lambda m: m.remember_result(
            text,
            scope=scope,
            kind=kind,
            tags=tag,
            aliases=alias,
            project=project,
            observed_at=observed_at,
            valid_at=valid_at,
            invalid_at=invalid_at,
        ),
    )
    data = {"memory": result.memory.to_dict(), "created": result.created}
    if quiet:
        sys.stdout.write(result.memory.id + "\n")
        return
    _print(
        data,
        as_json,
        lambda d: console.print(
            f"{'remembered' if d['created'] else 'already known'} {d['memory']['id']} "
            f"(v{d['memory']['version']}, {d['memory']['status']})"
        ),
    )


@app.command()
def recall(
    query: str,
    db: Db = None,
    config: Config = None,
    scope: ScopeOpt = "agent",
    k: Annotated[int | None, typer.Option("-k", help="How many results.")] = None,
    as_of: Annotated[str | None, typer.Option(help="What was valid at this time.")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="Only these kinds.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only rows with these tags.")] = None,
    project: Annotated[str | None, typer.Option(help="Project partition.")] = None,
    as_json: Json = False,
) -> None:
    """Recall memories relevant to QUERY."""
    result = _memories(
        db,
        config,
        lambda m: m.recall(
            query,
            scope=scope,
            k=k,
            as_of=as_of,
            kinds=kind,
            tags=tag,
            project=project,
        ),
    )
    data = result.to_dict()

    def render(d: dict[str, Any]) -> None:
        _table(
            [
                {
                    "rank": h["rank"],
                    "score": h["score"],
                    "id": h["memory"]["id"],
                    "matched": ",".join(h["matched"]),
                    "text": h["memory"]["text"],
                }
                for h in d["results"]
            ],
            ["rank", "score", "id", "matched", "text"],
        )
        meta = d["meta"]
        if meta["fallback"]:
            console.print(f"[yellow]fallback:[/yellow] {meta['reason']}")

    _print(data, as_json, render)


@app.command("list")
def list_(
    db: Db = None,
    config: Config = None,
    scope: ScopeOpt = "agent",
    kind: Annotated[list[str] | None, typer.Option(help="Only these kinds.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only rows with these tags.")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size.")] = None,
    cursor: Annotated[str | None, typer.Option(help="Cursor from a previous page.")] = None,
    as_json: Json = False,
) -> None:
    """List memories in one scope, newest first."""
    page = _memories(
        db,
        config,
        lambda m: m.list(
            scope=scope,
            kinds=kind,
            tags=tag,
            limit=limit,
            cursor=cursor,
        ),
    )
    data = {"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}
    _print(data, as_json, lambda d: _table(d["items"], ["id", "version", "kind", "status", "text"]))


@app.command()
def get(memory_id: str, db: Db = None, config: Config = None, as_json: Json = False) -> None:
    """Show a memory's current version."""
    memory = _memories(db, config, lambda m: m.get(memory_id))
    _print(memory.to_dict(), as_json, lambda d: console.print_json(json.dumps(d, default=str)))


@app.command()
def history(memory_id: str, db: Db = None, config: Config = None, as_json: Json = False) -> None:
    """Show every version of a memory."""
    versions = _memories(db, config, lambda m: m.history(memory_id))
    data = {"versions": [v.to_dict() for v in versions]}
    _print(
        data,
        as_json,
        lambda d: _table(
            d["versions"], ["version", "status", "relation", "recorded_at", "reason", "text"]
        ),
    )


@app.command()
def revise(
    memory_id: str,
    text: str,
    db: Db = None,
    config: Config = None,
    expected_version: Annotated[int | None, typer.Option(help="Version you replace.")] = None,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    as_json: Json = False,
) -> None:
    """Write a new version of a memory with new TEXT."""
    memory = _memories(
        db,
        config,
        lambda m: m.revise(memory_id, text, expected_version=expected_version, reason=reason),
    )
    _print(memory.to_dict(), as_json, lambda d: console.print(f"{d['id']} is now v{d['version']}"))


@app.command()
def status(
    memory_id: str,
    new_status: Annotated[
        str, typer.Argument(metavar="STATUS", help="active, quarantined, superseded, ...")
    ],
    db: Db = None,
    config: Config = None,
    expected_version: Annotated[int | None, typer.Option(help="Version you replace.")] = None,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    as_json: Json = False,
) -> None:
    """Move a memory through its lifecycle, e.g. release a quarantined one: STATUS active."""
    memory = _memories(
        db,
        config,
        lambda m: m.set_status(
            memory_id, new_status, reason=reason, expected_version=expected_version
        ),
    )
    _print(
        memory.to_dict(),
        as_json,
        lambda d: console.print(f"{d['id']} is now {d['status']} (v{d['version']})"),
    )


@app.command()
def forget(
    memory_id: str,
    db: Db = None,
    config: Config = None,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    as_json: Json = False,
) -> None:
    """Forget a memory (logical: history keeps it)."""
    memory = _memories(db, config, lambda m: m.forget(memory_id, reason=reason))
    _print(memory.to_dict(), as_json, lambda d: console.print(f"forgot {d['id']}"))


@app.command()
def supersede(
    old_id: str,
    new_id: str,
    db: Db = None,
    config: Config = None,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    expected_version: Annotated[
        int | None,
        typer.Option(help="The version of OLD_ID you read (required against a server)."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Mark OLD_ID superseded by NEW_ID."""
    memory = _memories(
        db,
        config,
        lambda m: m.supersede(old_id, new_id, reason=reason, expected_version=expected_version),
    )
    _print(memory.to_dict(), as_json, lambda d: console.print(f"{d['id']} superseded"))


@app.command()
def migrate(
    db: Db = None,
    config: Config = None,
    citus: Annotated[
        bool, typer.Option("--citus", help="Distribute the tables by tenant_id (Citus).")
    ] = False,
) -> None:
    """Apply pending schema migrations and store upkeep (per-scope indexes on PostgreSQL)."""
    from quipu.composition import migrate_database

    settings = _settings(db, config)
    try:
        report = migrate_database(settings, citus=citus)
    except QuipuError as exc:
        fail(exc, 1)
    sys.stdout.write(json.dumps(report, default=str) + "\n")


@app.command()
def reindex(
    db: Db = None,
    config: Config = None,
    as_json: Json = False,
    corpus: Annotated[
        bool,
        typer.Option(
            "--corpus",
            help="Re-embed the documents plane: every corpus pinned to another model than the "
            "current one (and re-pin it), and chunks without a vector.",
        ),
    ] = False,
    every: Annotated[
        bool, typer.Option("--all", help="With --corpus: re-embed every chunk of every corpus.")
    ] = False,
) -> None:
    """Embed rows stored without a vector (embedder was down, deferred, or another model);
    with --corpus, re-index the documents plane after a model change (progress on stderr)."""
    if corpus:
        from quipu.surfaces.cli.reindex_corpus import reindex_corpus

        report = _run(db, config, lambda s, _st: reindex_corpus(s, every, _progress()))
        _print(
            report,
            as_json,
            lambda d: console.print(
                f"re-indexed {d['chunks']} chunks in {d['corpora']} corpora"
                f" ({d['repinned']} moved to {d['model']})"
            ),
        )
        return
    count = _run(db, config, lambda s, _st: s.embed_pending())
    _print(
        {"embedded": count}, as_json, lambda d: console.print(f"embedded {d['embedded']} memories")
    )


@app.command()
def config(config_file: Config = None, as_json: Json = False) -> None:
    """Show every setting with its current value and help."""
    from quipu.settings import Settings

    settings = _settings(None, config_file, server_ok=True)
    rows = [
        {
            "setting": name,
            "value": value,  # credentials masked by their type (issue 20 defect 15)
            "help": Settings.model_fields[name].description,
        }
        for name, value in settings.redacted().items()
    ]
    _print(rows, as_json, lambda r: _table(r, ["setting", "value", "help"]))


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}"),
        TimeElapsedColumn(),
        console=err,
    )


def main() -> None:
    app()
