"""`quipu worker` and `quipu jobs list|cancel|retry`: the durable queue from the shell."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from quipu.errors import NotFound, QuipuError
from quipu.surfaces.cli.options import (
    AsJson,
    Config,
    Db,
    Output,
    fail,
    print_json,
    rows_table,
    settings_or_exit,
)

if TYPE_CHECKING:
    from quipu.runtime import Runtime

jobs = typer.Typer(help="Inspect, cancel and retry durable jobs.", no_args_is_help=True)
console = Output()
err = Output(stderr=True)


def _runtime(db: str | None, config: Path | None) -> Runtime:
    from quipu.composition import build_runtime, build_service

    settings = settings_or_exit(db, config)
    try:
        return build_runtime(settings, build_service(settings))
    except QuipuError as exc:
        fail(exc, 2)


def worker(
    db: Db = None,
    config: Config = None,
    once: Annotated[bool, typer.Option("--once", help="Run due jobs, then exit.")] = False,
    as_json: AsJson = False,
) -> None:
    """Run a job worker: promotion, sweeps, pruning, embedding backfill. Several workers may
    share one store; a job is held by one worker at a time (lease + fencing token)."""
    rt = _runtime(db, config)
    try:
        if once:
            rt.worker.schedule()
            done = rt.worker.drain()
            if as_json:
                print_json({"ran": done})
            else:
                console.print(f"ran {done} job(s)")
            return
        console.print(f"worker {rt.worker.name} running; Ctrl-C to stop")
        signal.signal(signal.SIGTERM, lambda *_: rt.worker.stop(0))
        with contextlib.suppress(KeyboardInterrupt):
            rt.worker.run_forever()
    finally:
        rt.close()


@jobs.command("list")
def jobs_list(
    db: Db = None,
    config: Config = None,
    status: Annotated[str | None, typer.Option(help="queued, running, succeeded, ...")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    limit: Annotated[int, typer.Option(help="How many.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List jobs, newest first."""
    from quipu.core import validate
    from quipu.core.jobs import JobStatus

    rt = _runtime(db, config)
    try:
        wanted = None if status is None else validate.enum(JobStatus, status, field="status")
        found = [j.to_dict() for j in rt.queue.store.list_jobs(tenant, wanted, limit)]
    except QuipuError as exc:
        fail(exc, 1)
    finally:
        rt.close()
    _print(found, as_json)


def _print(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(rows, default=str) + "\n")
        return
    cols = ["job_id", "tenant_id", "kind", "status", "attempts", "last_error", "updated_at"]
    console.print(rows_table(rows, cols, console.width))


@jobs.command("cancel")
def jobs_cancel(job_id: str, db: Db = None, config: Config = None, as_json: AsJson = False) -> None:
    """Cancel a queued or running job (a running holder loses its lease); audited."""
    _act(db, config, job_id, "cancel", as_json)


@jobs.command("retry")
def jobs_retry(job_id: str, db: Db = None, config: Config = None, as_json: AsJson = False) -> None:
    """Queue a failed or cancelled job again; audited."""
    _act(db, config, job_id, "retry", as_json)


def _act(db: str | None, config: Path | None, job_id: str, act: str, as_json: bool) -> None:
    """Cancel or retry as the shell's operator, an admin of the job's tenant: the same use case
    as the HTTP routes, audited as ``job.cancel`` / ``job.retry`` with surface ``cli`` (SAFE-4)."""
    from quipu.composition import local_principal
    from quipu.core import validate
    from quipu.core.records import Role

    settings = settings_or_exit(db, config)
    rt = _runtime(db, config)
    try:
        ident = validate.identifier(job_id, field="job_id")
        found = rt.queue.store.get_job(ident)
        if found is None:
            raise NotFound(f"no job {ident}", details={"job_id": ident})
        who = replace(local_principal(settings, "cli"), role=Role.ADMIN, tenant_id=found.tenant_id)
        if act == "cancel":
            job = rt.governance.job_cancel(who, ident)
        else:
            job = rt.governance.job_retry(who, ident)
    except QuipuError as exc:
        fail(exc, 1)
    finally:
        rt.close()
    verb = "cancelled" if act == "cancel" else "queued"
    if as_json:
        print_json(job.to_dict())
        return
    console.print(f"{job.job_id}: {job.status.value} ({verb})", markup=False)
