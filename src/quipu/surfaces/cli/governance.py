"""`quipu erase`, `erase-subject`, `reclaim`, `holds`, `review`, `restore`, `merge`, `snapshots`,
`projects`, `subjects` and `audit`: the governance use cases (issue 22) from the shell, on a store.

Commands act in one tenant (``--tenant``, default the ``local_tenant`` setting) as the operator
at the shell: an admin, or for ``subjects`` a superadmin. Reviews and judgements name the person
reviewing (``--reviewer``): the store's one local principal wrote what its model proposed, and
a writer never reviews its own candidate (LIFE-5). Errors print their stable code and exit 1."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from quipu.core import validate
from quipu.core.jobs import JobStatus
from quipu.core.records import Principal, Role
from quipu.errors import QuipuError
from quipu.surfaces.cli.options import Config, Db, Output, fail, settings_or_exit

if TYPE_CHECKING:  # the runtime is imported when a command runs: `quipu --help` stays cheap
    from quipu.runtime import Runtime

holds = typer.Typer(help="Set, list and lift legal holds (LIFE-4).", no_args_is_help=True)
review = typer.Typer(
    help="The review queue of model output and quarantine; affirm and refute.",
    no_args_is_help=True,
)
snapshots = typer.Typer(
    help="Pin exact versions for a run, and resolve them.", no_args_is_help=True
)
projects = typer.Typer(help="The tenant's project registry (SCOPE-6).", no_args_is_help=True)
console = Output()
err = Output(stderr=True)
T = TypeVar("T")

Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
TenantOpt = Annotated[
    str | None, typer.Option("--tenant", help="Tenant to act in (default: local_tenant).")
]
Reason = Annotated[str, typer.Option("--reason", help="Why (required; audited).")]
Reviewer = Annotated[
    str, typer.Option("--reviewer", help="Who reviews (recorded as the actor; not the writer).")
]
Expected = Annotated[int | None, typer.Option(help="The version you expect to replace.")]


def _act(
    db: str | None,
    config: Path | None,
    tenant: str | None,
    action: Callable[[Runtime, Principal], T],
    *,
    role: Role = Role.ADMIN,
    reviewer: str | None = None,
) -> T:
    """``action`` on the runtime of the store ``--db`` names, as the shell's operator."""
    from quipu.composition import build_runtime, build_service, local_principal

    settings = settings_or_exit(db, config)
    try:
        rt = build_runtime(settings, build_service(settings))
    except QuipuError as exc:
        fail(exc, 2)
    try:
        who = replace(local_principal(settings, "cli"), role=role)
        if tenant is not None:
            who = replace(who, tenant_id=validate.identifier(tenant, field="tenant"))
        if reviewer is not None:
            name = validate.identifier(reviewer, field="reviewer")
            who = replace(who, key_id=f"reviewer:{name}", agent_id=None)
        return action(rt, who)
    except QuipuError as exc:
        err.print(f"[red]{escape(exc.code)}:[/red] {escape(exc.message)}")
        if exc.details:
            err.print(escape(json.dumps(exc.details, default=str)))
        raise typer.Exit(1) from None
    finally:
        rt.close()


def _out(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    else:
        render(data)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    table = Table(*columns)
    for row in rows:
        table.add_row(*[escape(str(row.get(c, ""))) for c in columns])
    console.print(table)


def _counts(data: dict[str, Any]) -> None:
    rows = [{"table": k, "count": v} for k, v in sorted(data["counts"].items())]
    _table(rows, ["table", "count"])


# -- erase (LIFE-4) ---------------------------------------------------------------------------
def erase(
    memory_id: str,
    reason: Reason,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    as_json: Json = False,
) -> None:
    """Erase a memory: the content of every version goes, a tombstone stays (LIFE-4)."""
    erased = _act(
        db, config, tenant, lambda rt, who: rt.governance.erase(who, memory_id, reason=reason)
    )

    def render(d: dict[str, Any]) -> None:
        console.print(f"erased {memory_id}")
        _counts(d)

    _out(erased.to_dict(), as_json, render)


def erase_subject(
    user_id: str,
    reason: Reason,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Run it here (else a worker runs it).")
    ] = True,
    as_json: Json = False,
) -> None:
    """Erase everything of one end user: memories, session turns, what jobs kept. Prints the
    progress, then what went, counted per table."""

    def run(rt: Runtime, who: Principal) -> dict[str, Any]:
        from quipu.governance import ERASE_SUBJECT, SUBJECT_STAGES
        from quipu.jobs.worker import Worker

        job, _ = rt.governance.erase_subject(who, user_id, reason=reason)
        if not wait:
            return job.to_dict()
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed}"),
            TimeElapsedColumn(), console=err, disable=as_json,
        ) as bars:  # fmt: skip
            tasks = {s: bars.add_task(f"{s} erased", total=None) for s in SUBJECT_STAGES}

            def progress(stage: str, done: int) -> None:
                bars.advance(tasks[stage], done)

            worker = Worker(
                rt.queue,
                {ERASE_SUBJECT: lambda lease: rt.governance.run_subject_erasure(lease, progress)},
            )
            while True:
                found = rt.queue.store.get_job(job.job_id)
                assert found is not None
                if found.status not in (JobStatus.QUEUED, JobStatus.RUNNING):
                    break
                if worker.run_once() is None:
                    time.sleep(0.2)  # held by another worker: wait for it
        return rt.governance.erasure_job(who, job.job_id).to_dict()

    data = _act(db, config, tenant, run)
    if data["status"] not in ("succeeded", "queued"):
        err.print(f"[red]erasure {data['status']}:[/red] {escape(str(data['last_error']))}")
        raise typer.Exit(1)

    def render(d: dict[str, Any]) -> None:
        if d["status"] == "queued":
            console.print(f"queued erasure {d['job_id']} of {user_id}")
            return
        console.print(f"erased {d['result']['families']} memories of {user_id}")
        _counts(d["result"])

    _out(data, as_json, render)


def reclaim(db: Db = None, config: Config = None, as_json: Json = False) -> None:
    """Rewrite the store so freed row images leave the disk (SQLite: VACUUM and a truncated
    WAL; PostgreSQL: VACUUM FULL of the content tables). Locks the store while it runs."""
    report = _act(db, config, None, lambda rt, _who: rt.service.store.reclaim())
    _out(report, as_json, lambda d: console.print(escape(json.dumps(d))))


# -- legal holds ------------------------------------------------------------------------------
@holds.command("set")
def holds_set(
    kind: Annotated[str, typer.Argument(help="memory, subject or tenant.")],
    reason: Reason,
    target: Annotated[str | None, typer.Argument(help="Memory id or end user id.")] = None,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    as_json: Json = False,
) -> None:
    """Set a legal hold: erases of its target answer legal_hold and change nothing."""
    hold = _act(
        db, config, tenant, lambda rt, who: rt.governance.hold(who, kind, target, reason=reason)
    )
    _out(
        hold.to_dict(),
        as_json,
        lambda d: console.print(f"hold {d['hold_id']} on {d['kind']} {d['target']}"),
    )


@holds.command("list")
def holds_list(
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    include_released: Annotated[bool, typer.Option("--all", help="Lifted ones too.")] = False,
    as_json: Json = False,
) -> None:
    """List legal holds."""
    found = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.holds(who, include_released=include_released),
    )
    rows = [h.to_dict() for h in found]
    _out(rows, as_json, lambda r: _table(r, ["hold_id", "kind", "target", "reason", "active"]))


@holds.command("release")
def holds_release(
    hold_id: str,
    reason: Reason,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    as_json: Json = False,
) -> None:
    """Lift a legal hold."""
    hold = _act(
        db, config, tenant, lambda rt, who: rt.governance.release_hold(who, hold_id, reason=reason)
    )
    _out(hold.to_dict(), as_json, lambda d: console.print(f"lifted hold {d['hold_id']}"))


# -- review, judgement (LIFE-5, LIFE-6, MEM-3) -------------------------------------------------
@review.command("list")
def review_list(
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    status: Annotated[str | None, typer.Option(help="candidate or quarantined.")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size.")] = None,
    cursor: Annotated[str | None, typer.Option(help="Next page.")] = None,
    as_json: Json = False,
) -> None:
    """The memories awaiting review, newest first."""
    page = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.review_queue(who, status=status, cursor=cursor, limit=limit),
    )
    data = {"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}
    _out(data, as_json, lambda d: _table(d["items"], ["id", "version", "status", "source", "text"]))


@review.command("decide")
def review_decide(
    memory_id: str,
    decision: Annotated[str, typer.Argument(help="activate or reject.")],
    reason: Reason,
    reviewer: Reviewer,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    expected_version: Expected = None,
    as_json: Json = False,
) -> None:
    """Activate or reject a candidate or quarantined memory."""
    memory = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.review(
            who, memory_id, decision, reason=reason, expected_version=expected_version
        ),
        reviewer=reviewer,
    )
    _out(memory.to_dict(), as_json, lambda d: console.print(f"{d['id']} is now {d['status']}"))


@review.command("affirm")
def review_affirm(
    memory_id: str,
    reason: Reason,
    reviewer: Reviewer,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    as_json: Json = False,
) -> None:
    """Affirm a memory: verdict, reviewer and time on a new version; it becomes verified."""
    memory = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.affirm(who, memory_id, reason=reason),
        reviewer=reviewer,
    )
    _out(
        memory.to_dict(), as_json, lambda d: console.print(f"{d['id']} affirmed (v{d['version']})")
    )


@review.command("refute")
def review_refute(
    memory_id: str,
    reason: Reason,
    reviewer: Reviewer,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    as_json: Json = False,
) -> None:
    """Refute a memory: it leaves recall and list (history keeps it)."""
    memory = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.refute(who, memory_id, reason=reason),
        reviewer=reviewer,
    )
    _out(memory.to_dict(), as_json, lambda d: console.print(f"{d['id']} refuted (v{d['version']})"))


# -- restore and merge (LIFE-7) ---------------------------------------------------------------
def restore(
    memory_id: str,
    version: int,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    expected_version: Expected = None,
    as_json: Json = False,
) -> None:
    """Write VERSION's content as the memory's new version (history is never rewound)."""
    memory = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.restore(
            who, memory_id, version, reason=reason, expected_version=expected_version
        ),
    )
    _out(memory.to_dict(), as_json, lambda d: console.print(f"{d['id']} is now v{d['version']}"))


def merge(
    memory_ids: Annotated[list[str], typer.Argument(help="Ids of one scope; the first survives.")],
    text: Annotated[str, typer.Option("--text", help="The merged text.")],
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
    as_json: Json = False,
) -> None:
    """Merge duplicates: the first id survives with TEXT, the others are superseded by it."""
    memory = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.merge(who, memory_ids, text, reason=reason),
    )
    _out(
        memory.to_dict(),
        as_json,
        lambda d: console.print(f"merged into {d['id']} (v{d['version']})"),
    )


# -- snapshots, projects, subjects ------------------------------------------------------------
@snapshots.command("create")
def snapshots_create(
    memory_ids: Annotated[
        list[str], typer.Argument(help="Memories to pin at their current version.")
    ],
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    label: Annotated[str | None, typer.Option(help="A label for the run.")] = None,
    as_json: Json = False,
) -> None:
    """Pin the current versions of memories for a run."""
    snap = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.snapshot_create(who, ids=memory_ids, label=label),
    )
    _out(snap.to_dict(), as_json, lambda d: console.print(f"snapshot {d['snapshot_id']}"))


@snapshots.command("resolve")
def snapshots_resolve(
    snapshot_id: str,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    as_json: Json = False,
) -> None:
    """Each pinned version, or why it is withheld now."""
    resolved = _act(
        db, config, tenant, lambda rt, who: rt.governance.snapshot_resolve(who, snapshot_id)
    )
    data = resolved.to_dict()

    def render(d: dict[str, Any]) -> None:
        rows = [
            {"id": m["id"], "version": m["version"], "withheld": m["withheld"] or "",
             "text": (m["memory"] or {}).get("text", "")}
            for m in d["members"]
        ]  # fmt: skip
        _table(rows, ["id", "version", "withheld", "text"])

    _out(data, as_json, render)


@projects.command("create")
def projects_create(
    project_id: str,
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    as_json: Json = False,
) -> None:
    """Register a project; writes name registered projects only (SCOPE-6)."""
    project = _act(
        db, config, tenant, lambda rt, who: rt.governance.project_create(who, project_id, name=name)
    )
    _out(project.to_dict(), as_json, lambda d: console.print(f"project {d['project_id']}"))


@projects.command("list")
def projects_list(
    db: Db = None, config: Config = None, tenant: TenantOpt = None, as_json: Json = False
) -> None:
    """List the tenant's projects."""
    found = _act(db, config, tenant, lambda rt, who: rt.governance.projects(who))
    _out(
        [p.to_dict() for p in found],
        as_json,
        lambda r: _table(r, ["project_id", "name", "created_at"]),
    )


def subjects(
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    limit: Annotated[int | None, typer.Option(help="Page size.")] = None,
    cursor: Annotated[str | None, typer.Option(help="Next page.")] = None,
    as_json: Json = False,
) -> None:
    """Every subject (scope owner) of the tenant with its live memories (oversight; audited)."""
    found, next_cursor = _act(
        db,
        config,
        tenant,
        lambda rt, who: rt.governance.subjects(who, cursor=cursor, limit=limit),
        role=Role.SUPERADMIN,
    )
    data = {"items": [s.to_dict() for s in found], "next_cursor": next_cursor}
    _out(data, as_json, lambda d: _table(d["items"], ["scope", "owner", "live"]))


def audit(
    db: Db = None,
    config: Config = None,
    tenant: TenantOpt = None,
    limit: Annotated[int | None, typer.Option(help="Page size.")] = None,
    cursor: Annotated[str | None, typer.Option(help="Next page.")] = None,
    as_json: Json = False,
) -> None:
    """The tenant's audit log, newest first: who (key, role, agent, user, surface) did what to
    which ids, and why (SAFE-4)."""
    found, next_cursor = _act(
        db, config, tenant, lambda rt, who: rt.governance.audit(who, cursor=cursor, limit=limit)
    )
    data = {"items": [e.to_dict() for e in found], "next_cursor": next_cursor}
    _out(data, as_json, _audit_lines)


def _audit_lines(data: dict[str, Any]) -> None:
    """One line per event (a table would truncate the ids in a terminal)."""
    for e in data["items"]:
        who = f"{e['actor_key']} ({e['role']}, agent {e['agent_id']}, user {e['user_id']})"
        why = f": {e['reason']}" if e["reason"] else ""
        targets = ", ".join(e["target_ids"])
        line = f"{e['seq']} {e['at']} {e['action']} by {who} via {e['surface']} on {targets}{why}"
        console.print(escape(line), soft_wrap=True)
    if data["next_cursor"]:
        console.print(f"next page: --cursor {escape(data['next_cursor'])}")


def register(app: typer.Typer) -> None:
    """Add these commands to the ``quipu`` application."""
    app.command("erase")(erase)
    app.command("erase-subject")(erase_subject)
    app.command("reclaim")(reclaim)
    app.command("restore")(restore)
    app.command("merge")(merge)
    app.command("subjects")(subjects)
    app.command("audit")(audit)
    app.add_typer(holds, name="holds")
    app.add_typer(review, name="review")
    app.add_typer(snapshots, name="snapshots")
    app.add_typer(projects, name="projects")
