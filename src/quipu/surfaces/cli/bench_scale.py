"""`quipu bench scale`: recall at 1k-100k memories per scope with its floors, cold start, RSS
and ingest at defaults (issue 23), registered on the bench command group."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from quipu.surfaces.cli.bench import Data, Details, Out, _dataset, _emit, app, console


@app.command()
def scale(
    database: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="A memory file or postgresql:// URL to build in and reuse (scopes already "
            "holding their rows are not rebuilt). Default: a temporary file.",
        ),
    ] = None,
    size: Annotated[
        list[int] | None,
        typer.Option("--size", min=1, help="Memories in one measured scope (repeatable)."),
    ] = None,
    tenants: Annotated[
        int, typer.Option(min=0, help="Also build this many small tenants and time one.")
    ] = 0,
    per_tenant: Annotated[int, typer.Option(min=1, help="Memories per small tenant.")] = 1000,
    alone: Annotated[
        str | None,
        typer.Option(
            "--alone-db",
            help="With --tenants: a memory file or postgresql:// URL of an empty store where "
            "the timed tenant is built alone, to compare with it inside --db. Default: a "
            "temporary file.",
        ),
    ] = None,
    rounds: Annotated[
        int, typer.Option(min=1, help="Interleaved rounds of the tenant inside and alone.")
    ] = 3,
    rss_walk: Annotated[
        bool,
        typer.Option(
            "--rss-walk/--no-rss-walk",
            help="With --tenants: RSS of one fresh process recalling in every small tenant, "
            "then in the largest scope.",
        ),
    ] = True,
    graph: Annotated[
        bool,
        typer.Option(
            "--graph/--no-graph",
            help="Open the stores with graph_extract on (each memory written with its graph "
            "mirror, as remember does) or off (faster builds; recall reads no graph unless "
            "graph_weight is set).",
        ),
    ] = True,
    undated: Annotated[int, typer.Option(min=1, help="Questions naming no date, sampled.")] = 100,
    ingest_turns: Annotated[
        int, typer.Option("--ingest", min=0, help="Turns written through remember (0: none).")
    ] = 300,
    cold: Annotated[
        bool, typer.Option("--cold/--no-cold", help="Measure cold start (library and serve).")
    ] = True,
    cache: Annotated[
        Path | None,
        typer.Option(help="Folder keeping the turns' embeddings between runs."),
    ] = None,
    details: Details = False,
    data: Data = None,
    out: Out = None,
) -> None:
    """Recall at 1k-100k memories per scope (issue 23): p50/p95 by stage for questions naming
    a date and the others, the floors (query embedding, numpy's and the database's exact
    scans) in the same run, cold start of the library and of `quipu serve`, RSS, ingest
    turns/s."""
    from quipu.evals import scale as scale_bench

    path = _dataset(data, "locomo")
    with tempfile.TemporaryDirectory() as tmp:
        result = scale_bench.run(
            database or str(Path(tmp) / "scale.db"),
            data=path,
            cache_dir=cache or Path(tmp) / "cache",
            sizes=size or [1_000, 10_000, 100_000],
            tenants=tenants,
            per_tenant=per_tenant,
            alone=alone,
            rounds=rounds,
            rss_walk=rss_walk,
            graph=graph,
            undated=undated,
            ingest_turns=ingest_turns,
            cold=cold,
            details=details,
            progress=console.log,
        )
    _emit("scale", result, out)
