"""`quipu bench …`: measured speed and memory, written as JSON (and shown as a table)."""

from __future__ import annotations

import json
import platform
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.status import Status

import quipu
from quipu.evals import perf

app = typer.Typer(help="Benchmarks; each writes its results as JSON.", no_args_is_help=True)
console = Console(stderr=True)

Out = Annotated[Path | None, typer.Option("--out", help="Write the JSON result here too.")]


def _emit(name: str, result: dict[str, Any], out: Path | None) -> None:
    result = {
        "benchmark": name,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": perf.machine(),
        **result,
    }
    text = json.dumps(result, indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    print(text)


def _reporter(status: Status, label: str, total: int) -> Callable[[int], None]:
    def report(done: int) -> None:
        status.update(f"{label}: {done}/{total}")

    return report


@app.command()
def ingest(
    n: Annotated[int, typer.Option("-n", help="Memories to write.")] = 10_000,
    defer_embedding: Annotated[
        bool, typer.Option("--defer-embedding", help="Store without vectors, embed afterwards.")
    ] = False,
    runs: Annotated[int, typer.Option(help="Repetitions (fresh file each).")] = 1,
    out: Out = None,
) -> None:
    """Write N memories one remember() at a time; report memories/s (median, min-max)."""
    results = []
    for run in range(runs):
        label = f"run {run + 1}/{runs}"
        with tempfile.TemporaryDirectory() as tmp:
            mem = quipu.open(Path(tmp) / "bench.db")
            mem.remember("warm-up so the model is loaded before timing")
            with console.status(f"run {run + 1}/{runs}: ingesting {n}") as status:
                results.append(
                    perf.ingest(
                        mem,
                        n,
                        defer_embedding=defer_embedding,
                        progress=_reporter(status, label, n),
                    )
                )
            mem.close()
    rates = [r["memories_per_s"] for r in results]
    _emit(
        "ingest",
        {
            "n": n,
            "defer_embedding": defer_embedding,
            "runs": results,
            "memories_per_s": {
                "median": sorted(rates)[len(rates) // 2],
                "min": min(rates),
                "max": max(rates),
            },
        },
        out,
    )


@app.command()
def recall(
    n: Annotated[int, typer.Option("-n", help="Rows in the file.")] = 100_000,
    owners: Annotated[int, typer.Option(help="Scope owners the rows are spread over.")] = 1,
    queries: Annotated[int, typer.Option(help="Timed recalls.")] = 300,
    out: Out = None,
) -> None:
    """Recall latency in one scope of an N-row file (p50/p95/p99, first recall after restart,
    resident memory)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        result = perf.recall_latency(
            lambda: quipu.open(path),
            path,
            n,
            owners=owners,
            queries=queries,
            progress=console.log,
        )
    _emit("recall", result, out)
