"""`quipu bench …`: measured speed and memory, written as JSON (and shown as a table)."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.status import Status
from rich.table import Table

from quipu.surfaces.cli.options import Bars, Output, SettingOverrides, fail, parse_overrides

if TYPE_CHECKING:
    from quipu.evals import public_bench

app = typer.Typer(help="Benchmarks; each writes its results as JSON.", no_args_is_help=True)
console = Output(stderr=True)

Out = Annotated[Path | None, typer.Option("--out", help="Write the JSON result here too.")]


def _emit(name: str, result: dict[str, Any], out: Path | None) -> None:
    from quipu.evals import perf

    result = {
        "benchmark": name,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": perf.machine(),
        **result,
    }
    print(_write_json(result, out))


def _write_json(result: dict[str, Any], out: Path | None) -> str:
    """``result`` as indented JSON, written to ``out`` too when given (folders made)."""
    text = json.dumps(result, indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    return text


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
    import quipu
    from quipu.evals import perf

    results = []
    for run in range(runs):
        label = f"run {run + 1}/{runs}"
        with tempfile.TemporaryDirectory() as tmp:
            mem = quipu.open(Path(tmp) / "bench.db", worker_embedded=False, quota_per_owner=n + 100)
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
    warmup: Annotated[int, typer.Option(min=0, help="Untimed recalls before the timed ones.")] = 50,
    database: Annotated[
        str | None,
        typer.Option(help="An EMPTY postgresql:// database to measure instead of a temp file."),
    ] = None,
    background: Annotated[
        int, typer.Option(min=0, help="Extra rows in other tenants (e.g. 1000000).")
    ] = 0,
    background_tenants: Annotated[
        int, typer.Option(min=0, help="Tenants the background rows are spread over.")
    ] = 1000,
    overrides: SettingOverrides = None,
    out: Out = None,
) -> None:
    """Recall latency in one scope of an N-row store (p50/p95/p99, first recall after restart,
    resident memory, bytes on disk per row); with --background, also in one small tenant of
    a store that holds many."""
    import quipu
    from quipu.evals import perf

    settings: dict[str, Any] = dict(parse_overrides(overrides))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        target: str | Path = database or path
        result = perf.recall_latency(
            lambda: quipu.open(target, worker_embedded=False, **settings),
            n,
            owners=owners,
            queries=queries,
            background=background,
            background_tenants=background_tenants if background else 0,
            warmup=warmup,
            progress=console.log,
        )
    _emit("recall", {**result, "overrides": settings}, out)


# --------------------------------------------------------------------------------------
# Public conversational-memory benchmarks (EVAL-3): the logic is in quipu.evals.public_bench
# --------------------------------------------------------------------------------------

_DATA_FILES = {
    "locomo": "locomo/locomo10.json",
    "longmemeval": "longmemeval/longmemeval_s_subset_balanced.json",
}
Data = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="Benchmark file (any file of the same format). Default: ../shared/data/… beside "
        "the current directory or the source checkout.",
    ),
]
Limit = Annotated[
    int | None, typer.Option("--limit", min=1, help="Only the first N scored questions.")
]
Baselines = Annotated[
    bool,
    typer.Option(
        "--baselines",
        help="Also run BM25-only (bm25s), dense-only (exact kNN) and their plain rank fusion.",
    ),
]
Depth = Annotated[int, typer.Option("--depth", min=10, max=1000, help="Turns ranked per question.")]
Details = Annotated[
    bool, typer.Option("--details", help="Add each question's top-10 sessions/turns to the JSON.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the JSON instead of the tables.")]
VectorCache = Annotated[
    Path | None,
    typer.Option(
        "--vector-cache",
        help="A file keeping the model's vectors of the turns across runs (same vectors, "
        "same rankings; a lever study then skips most of the embedding).",
    ),
]
LatencyK = Annotated[
    int,
    typer.Option("--latency-k", min=1, max=100, help="Results of the timed recall call."),
]


@app.command()
def locomo(
    data: Data = None,
    limit: Limit = None,
    baselines: Baselines = False,
    depth: Depth = 50,
    details: Details = False,
    overrides: SettingOverrides = None,
    latency_k: LatencyK = 10,
    vector_cache: VectorCache = None,
    as_json: AsJson = False,
    out: Out = None,
) -> None:
    """LoCoMo evidence retrieval: categories 1-4, every speaker's turns indexed as
    "<speaker>: <text>", session- and turn-level recall@k, nDCG@10, context tokens."""
    from quipu.evals import public_bench

    path = _dataset(data, "locomo")
    _public(
        "locomo",
        path,
        public_bench.locomo_haystacks(path, limit),
        limit=limit,
        baselines=baselines,
        depth=depth,
        details=details,
        overrides=parse_overrides(overrides),
        latency_k=latency_k,
        vector_cache=vector_cache,
        as_json=as_json,
        out=out,
    )


@app.command()
def longmemeval(
    data: Data = None,
    limit: Limit = None,
    baselines: Baselines = False,
    depth: Depth = 50,
    details: Details = False,
    overrides: SettingOverrides = None,
    latency_k: LatencyK = 10,
    vector_cache: VectorCache = None,
    as_json: AsJson = False,
    out: Out = None,
) -> None:
    """LongMemEval evidence retrieval (official protocol: user turns only, abstention
    questions skipped): session- and turn-level recall@k, nDCG@10, context tokens."""
    from quipu.evals import public_bench

    path = _dataset(data, "longmemeval")
    _public(
        "longmemeval",
        path,
        public_bench.longmemeval_haystacks(path, limit),
        limit=limit,
        baselines=baselines,
        depth=depth,
        details=details,
        overrides=parse_overrides(overrides),
        latency_k=latency_k,
        vector_cache=vector_cache,
        as_json=as_json,
        out=out,
    )


@app.command()
def beam(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="BEAM's folder of numbered chats (chats/100K of github.com/mohammadtavakoli78/"
            "BEAM), read where it lies; never fetched.",
        ),
    ],
    limit: Limit = None,
    baselines: Baselines = False,
    depth: Depth = 50,
    details: Details = False,
    overrides: SettingOverrides = None,
    latency_k: LatencyK = 10,
    vector_cache: VectorCache = None,
    as_json: AsJson = False,
    out: Out = None,
) -> None:
    """BEAM message-level evidence retrieval (long technical chats): every message written,
    the probing questions that name evidence messages; message (turn) all/any@k per category."""
    from quipu.evals.beam import beam_haystacks
    from quipu.evals.datasets import DatasetFormatError

    try:
        haystacks = beam_haystacks(data, limit)
    except DatasetFormatError as error:
        fail(error, 2)
    _public(
        "beam",
        data,
        haystacks,
        limit=limit,
        baselines=baselines,
        depth=depth,
        details=details,
        overrides=parse_overrides(overrides),
        latency_k=latency_k,
        vector_cache=vector_cache,
        as_json=as_json,
        out=out,
    )


@app.command()
def tech(
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="A corpus written by `quipu eval generate-tech` (its folder or file). "
            "Default: generated in memory from --seed and --chats.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the generated corpus.")] = 31,
    chats: Annotated[
        int, typer.Option(min=1, max=1000, help="Chats of the generated corpus.")
    ] = 20,
    split: Annotated[
        str, typer.Option(help="Chats to measure: dev, test (held out) or all.")
    ] = "all",
    limit: Limit = None,
    baselines: Baselines = False,
    depth: Depth = 50,
    details: Details = False,
    overrides: SettingOverrides = None,
    latency_k: LatencyK = 10,
    vector_cache: VectorCache = None,
    as_json: AsJson = False,
    out: Out = None,
) -> None:
    """Generated technical chats (a developer building a web app: code, stack traces,
    decisions, corrections): every message written, questions with evidence messages;
    message (turn) all/any@k per category."""
    from quipu.evals import tech_corpus
    from quipu.evals.datasets import DatasetFormatError

    if split not in ("all", *tech_corpus.SPLITS):
        raise typer.BadParameter("must be dev, test or all", param_hint="--split")
    try:
        corpus = tech_corpus.generate(seed, chats) if data is None else tech_corpus.load(data)
    except DatasetFormatError as error:
        fail(error, 2)
    source = data or Path(f"generated:seed={seed},chats={chats}")
    _public(
        f"tech ({split})",
        source,
        tech_corpus.tech_haystacks(corpus, split, limit),
        limit=limit,
        baselines=baselines,
        depth=depth,
        details=details,
        overrides=parse_overrides(overrides),
        latency_k=latency_k,
        vector_cache=vector_cache,
        as_json=as_json,
        out=out,
    )


@app.command()
def compare(
    before: Annotated[Path, typer.Argument(help="A bench JSON written with --details.")],
    after: Annotated[Path, typer.Argument(help="Another, on the same data.")],
    system: Annotated[
        str, typer.Option("--system", help="Which system of both runs to compare.")
    ] = "quipu",
    ks: Annotated[
        list[int] | None,
        typer.Option("--k", min=1, help="Cut-offs (repeatable; default 5 and 10)."),
    ] = None,
    out: Out = None,
    as_json: AsJson = False,
) -> None:
    """Two `locomo`/`longmemeval` runs with --details, question by question: for each
    metric, the questions the second run gains and loses, and the exact sign test."""
    from quipu.evals import compare as evals_compare
    from quipu.evals.datasets import DatasetFormatError

    try:
        rows = evals_compare.compare(
            evals_compare.load_run(before, system),
            evals_compare.load_run(after, system),
            tuple(ks or (5, 10)),
        )
    except DatasetFormatError as error:
        fail(error, 2)
    table = Table(title=f"{system}: {after.name} against {before.name}")
    for column in ("metric", "before", "after", "won", "lost", "sign test p"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for row in rows:
        table.add_row(
            row.metric,
            f"{row.before:.3f}",
            f"{row.after:.3f}",
            str(len(row.won)),
            str(len(row.lost)),
            f"{row.p_value:.3g}",
        )
    result = {"before": str(before), "after": str(after), "system": system}
    full = {**result, "metrics": [asdict(row) for row in rows]}
    if as_json:
        print(json.dumps(full, default=str))
    else:
        Output().print(table)
    if out is not None:
        _write_json(full, out)


def _dataset(data: Path | None, name: str) -> Path:
    import quipu

    if data is not None:
        if not data.is_file():
            raise typer.BadParameter(f"no such file: {data}", param_hint="--data")
        return data
    relative = Path("..") / "shared" / "data" / _DATA_FILES[name]
    checkout = Path(quipu.__file__).resolve().parents[2]
    for candidate in (Path.cwd() / relative, checkout / relative):
        if candidate.is_file():
            return candidate.resolve()
    raise typer.BadParameter(
        f"{relative} not found beside the current directory or the checkout; pass --data",
        param_hint="--data",
    )


def _public(
    name: str,
    path: Path,
    haystacks: list[public_bench.Haystack],
    *,
    limit: int | None,
    baselines: bool,
    depth: int,
    details: bool,
    overrides: dict[str, str],
    latency_k: int,
    vector_cache: Path | None,
    as_json: bool,
    out: Path | None,
) -> None:
    from quipu.evals import perf, public_bench

    if not haystacks:
        raise typer.BadParameter(f"{path} holds no scored question", param_hint="--data")
    from quipu.embeddings.base import Embedder
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals.vector_cache import CachedEmbedder

    embedder: Embedder = LocalEmbedder()
    embedder.embed_batch(["warm-up so the model is loaded before timing"])
    cache = None if vector_cache is None else CachedEmbedder(embedder, vector_cache)
    columns = (
        TextColumn("{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="quipu-bench-") as tmp:
        systems = public_bench.make_systems(cache or embedder, Path(tmp), overrides).chosen(
            baselines
        )
        try:
            with Progress(*columns, console=console, transient=True) as bars:
                report = public_bench.run_benchmark(
                    haystacks,
                    systems,
                    depth=depth,
                    progress=Bars(bars),
                    details=details,
                    latency_k=latency_k,
                )
        finally:
            if cache is not None:
                cache.close()
    result = {
        "benchmark": name,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": perf.machine(),
        "data": str(path),
        "limit": limit,
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
        "vector_cache": None
        if cache is None
        else {"path": str(vector_cache), "hits": cache.hits, "misses": cache.misses},
        **report,
    }
    text = _write_json(result, out)
    if as_json:
        print(text)
    else:
        _render(result)


def _render(result: dict[str, Any]) -> None:
    stdout = Output()
    systems: dict[str, Any] = result["systems"]
    summary = Table(
        title=f"{result['benchmark']}: {result['questions']} questions, "
        f"{result['turns']} turns in {result['haystacks']} haystacks",
    )
    for column in ("system", "level", "all@1", "all@3", "all@5", "all@10", "any@5", "nDCG@10"):
        summary.add_column(column, justify="left" if column in ("system", "level") else "right")
    for system, body in systems.items():
        for level in ("session", "turn"):
            scores = body["overall"].get(level)
            if scores:
                summary.add_row(
                    system,
                    level,
                    *(f"{scores[m]:.3f}" for m in ("all@1", "all@3", "all@5", "all@10", "any@5")),
                    f"{scores['ndcg@10']:.3f}",
                )
    stdout.print(summary)

    costs = Table(title=f"cost per question (latency: recall of k={result['latency_k']})")
    for column in ("system", "index s", "ctx tok @1", "@3", "@5", "@10", "p50 ms", "p95 ms"):
        costs.add_column(column, justify="left" if column == "system" else "right")
    for system, body in systems.items():
        tokens = body["overall"]["context_tokens"]
        latency = body["recall_latency_ms"] or {}
        costs.add_row(
            system,
            f"{body['index_s']:.1f}",
            *(f"{tokens[f'@{k}']:.0f}" for k in (1, 3, 5, 10)),
            f"{latency.get('p50', 0):.1f}",
            f"{latency.get('p95', 0):.1f}",
        )
    stdout.print(costs)

    categories = Table(title="by category: session all@5 / all@10 (turn all@5)")
    categories.add_column("category", overflow="fold")
    categories.add_column("n", justify="right")
    for system in systems:
        categories.add_column(system, justify="right")
    names = next(iter(systems.values()))["by_category"]
    for category in names:
        cells = []
        for body in systems.values():
            group = body["by_category"][category]
            turn = group.get("turn")
            turn_cell = f" ({turn['all@5']:.3f})" if turn else ""
            session = group["session"]
            cells.append(f"{session['all@5']:.3f} / {session['all@10']:.3f}{turn_cell}")
        categories.add_row(category, str(names[category]["count"]), *cells)
    stdout.print(categories)


@app.command()
def http(
    n: Annotated[int, typer.Option("-n", help="Memories in the served scope.")] = 10_000,
    requests: Annotated[int, typer.Option(help="Requests per measurement.")] = 2_000,
    concurrency: Annotated[
        list[int] | None, typer.Option(help="Concurrency levels (repeatable).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, help="`quipu serve --workers`: server processes (default: serve's own)."
        ),
    ] = None,
    out: Out = None,
) -> None:
    """Serve N memories with `quipu serve` in a child process and load it over loopback:
    recall requests/s and latency at each concurrency, remember requests/s, 5xx count."""
    from quipu.evals import http_load

    with tempfile.TemporaryDirectory() as tmp:
        result = http_load.run(
            Path(tmp),
            rows=n,
            requests=requests,
            levels=concurrency or [1, 8, 32],
            workers=workers,
            progress=console.log,
        )
    _emit("http", result, out)


@app.command()
def promote(
    data: Annotated[Path, typer.Option("--data", help="A LoCoMo-format JSON file.")] = Path(
        "../shared/data/locomo/locomo10.json"
    ),
    limit: Annotated[int | None, typer.Option(help="Only the first N conversations.")] = None,
    out: Out = None,
) -> None:
    """Promotion throughput (turns/s incl. extraction and embedding) and memories per 100 turns
    on LoCoMo conversations."""
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals import promote_bench

    result = promote_bench.run(data, LocalEmbedder(), limit=limit, progress=console.log)
    _emit("promote", result, out)
