"""`quipu graph recall|facts|ontology|backfill|merge|revert|history`: the entity graph
(GRAPH-1) from the shell, on a store (a file or a ``postgresql://`` URL), as the trusted local
principal. Output is JSON; errors print their stable code and exit 1."""

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
    from quipu.graph.service import Graph

graph = typer.Typer(
    help="The entity graph of one scope: recall around named entities, facts about a subject, "
    "the tenant's ontology (GRAPH-1).",
    no_args_is_help=True,
)
err = Output(stderr=True)

Scope = Annotated[str, typer.Option(help="agent, user, agent_user or tenant (one scope).")]
AsOf = Annotated[str | None, typer.Option(help="Answer as of this ISO-8601 time.")]
Limit = Annotated[int | None, typer.Option(help="Most facts to return (1-200).")]


def _run(db: str | None, config: Path | None, action: Callable[[Graph], Any]) -> None:
    """``action`` on the graph of the store ``--db`` names; prints its JSON."""
    from quipu.composition import build_service, local_principal
    from quipu.graph.service import Graph, GraphService

    settings = settings_or_exit(db, config)
    try:
        service = build_service(settings)
    except QuipuError as exc:
        fail(exc, 2)
    try:
        plane = Graph(GraphService(service), local_principal(settings, "cli"))
        typer.echo(json.dumps(action(plane), ensure_ascii=False, indent=2))
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        if exc.details:
            err.print(escape(json.dumps(exc.details, default=str)))
        raise typer.Exit(1) from None
    finally:
        service.close()
        service.store.close()


@graph.command("recall")
def recall(
    query: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    hops: Annotated[int, typer.Option(help="Steps from the named entities (0-2).")] = 1,
    limit: Limit = None,
    as_of: AsOf = None,
) -> None:
    """The entities QUERY names and the facts within HOPS of them."""
    _run(
        db,
        config,
        lambda g: g.recall(query, scope=scope, hops=hops, limit=limit, as_of=as_of).to_dict(),
    )


@graph.command("facts")
def facts(
    subject: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    as_of: AsOf = None,
    include_invalidated: Annotated[
        bool, typer.Option(help="Also facts a later fact replaced.")
    ] = False,
    limit: Limit = None,
) -> None:
    """What is known about SUBJECT (a name, alias or entity id)."""
    _run(
        db,
        config,
        lambda g: g.facts(
            subject,
            scope=scope,
            as_of=as_of,
            include_invalidated=include_invalidated,
            limit=limit,
        ).to_dict(),
    )


@graph.command("ontology")
def ontology(
    db: Db = None,
    config: Config = None,
    type_: Annotated[
        list[str] | None, typer.Option("--type", help="An entity type to add (repeatable).")
    ] = None,
    predicate: Annotated[
        list[str] | None,
        typer.Option(help="A predicate to make single-valued (repeatable)."),
    ] = None,
) -> None:
    """The tenant's entity types and single-valued predicates; --type/--predicate add some."""
    _run(db, config, lambda g: g.declare(types=type_, predicates=predicate))


@graph.command("placement")
def placement(
    db: Db = None,
    config: Config = None,
    declare: Annotated[
        Path | None,
        typer.Option(
            "--declare",
            help="A JSON file {types, isolated, expected_version, reason}: declare a new "
            "version of the placement policy first (GRAPH-2).",
        ),
    ] = None,
    version: Annotated[int | None, typer.Option(help="Show this older version.")] = None,
) -> None:
    """The tenant's placement policy (which types' facts live in the tenant scope)."""
    from quipu.graph.placement import Placement

    body: Any = None
    if declare is not None:
        try:
            body = json.loads(declare.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            err.print(f"[red]invalid_placement:[/red] {escape(str(exc))}")
            raise typer.Exit(1) from None
        if not isinstance(body, dict):
            err.print("[red]invalid_placement:[/red] the file must hold a JSON object")
            raise typer.Exit(1)

    def act(g: Graph) -> Any:
        placing = Placement(g.service)
        if body is None:
            return placing.policy(g.principal, version)
        return placing.declare(
            g.principal,
            types=body.get("types"),
            isolated=body.get("isolated"),
            expected_version=body.get("expected_version"),
            reason=body.get("reason"),
        )

    _run(db, config, act)


@graph.command("backfill")
def backfill_command(
    db: Db = None,
    config: Config = None,
    scope: Annotated[
        str | None, typer.Option(help="Only this scope (agent, user, agent_user, tenant).")
    ] = None,
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant (default: every tenant).")
    ] = None,
    every: Annotated[int, typer.Option(help="Print progress every N memories.")] = 500,
) -> None:
    """Read the memories already stored into the entity graph: every current active memory
    with no graph rows yet (idempotent; run it again to resume an interrupted run)."""
    from quipu.composition import build_service
    from quipu.core import validate
    from quipu.core.records import Scope as ScopeName
    from quipu.graph.backfill import BackfillReport, backfill
    from quipu.graph.service import GraphService

    settings = settings_or_exit(db, config)
    try:
        which = None if scope is None else validate.enum(ScopeName, scope, field="scope")
        service = build_service(settings)
    except QuipuError as exc:
        fail(exc, 2)

    def show(report: BackfillReport) -> None:
        err.print(escape(json.dumps(report.to_dict())))

    try:
        done = backfill(
            GraphService(service), tenant, scope=which, progress=show, every=max(1, every)
        )
        typer.echo(json.dumps(done.to_dict(), indent=2))
    finally:
        service.close()
        service.store.close()


Reason = Annotated[str | None, typer.Option(help="Why (kept in the audit log).")]


@graph.command("merge")
def merge_command(
    keep: str,
    merge: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    reason: Reason = None,
) -> None:
    """Merge entity MERGE into entity KEEP (entity ids): a new version of KEEP; reversible."""
    from quipu.graph.merges import GraphMerges

    _run(
        db,
        config,
        lambda g: GraphMerges(g.service).merge(
            g.principal, keep, merge, scope=scope, reason=reason
        ),
    )


@graph.command("revert")
def revert_command(
    merge_id: str,
    db: Db = None,
    config: Config = None,
    scope: Scope = "agent",
    reason: Reason = None,
) -> None:
    """Undo the entity merge MERGE_ID: the merged entity returns with its facts and mentions."""
    from quipu.graph.merges import GraphMerges

    _run(
        db,
        config,
        lambda g: GraphMerges(g.service).revert(g.principal, merge_id, scope=scope, reason=reason),
    )


@graph.command("history")
def history_command(
    entity: str, db: Db = None, config: Config = None, scope: Scope = "agent"
) -> None:
    """The old versions of ENTITY (an entity id), oldest first: what each merge or revert
    replaced."""
    from quipu.graph.merges import GraphMerges

    _run(db, config, lambda g: GraphMerges(g.service).history(g.principal, entity, scope=scope))
