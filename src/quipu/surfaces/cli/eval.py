"""`quipu eval …`: quality measurements. They measure and never gate anything."""

from __future__ import annotations

import json
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Column, Table

from quipu.surfaces.cli.options import Bars, Output, SettingOverrides, fail, parse_overrides

if TYPE_CHECKING:
    from quipu.evals.promotion import PromotionReport
    from quipu.evals.retrieval_eval import RetrievalReport, TierScore
    from quipu.extraction import Extractor

#: The defaults of ``quipu.evals.synthetic`` and ``quipu.evals.retrieval_eval``, named here so
#: ``quipu --help`` does not import them (a unit test keeps them equal).
DEFAULT_CONVERSATIONS = 20
RETRIEVAL_K = 5

app = typer.Typer(help="Quality evaluations (they measure, never gate).", no_args_is_help=True)
console = Output()
err = Output(stderr=True)


class ExtractorName(StrEnum):
    DETERMINISTIC = "deterministic"
    MODEL = "model"


class Split(StrEnum):
    ALL = "all"
    DEV = "dev"
    TEST = "test"


def _extractor(
    name: ExtractorName,
    base_url: str | None,
    model: str | None,
    api_key: str | None,
    timeout: float,
    config: Path | None,
) -> Extractor:
    from quipu.extraction import DeterministicExtractor, ModelExtractor

    if name is ExtractorName.DETERMINISTIC:
        return DeterministicExtractor()
    if api_key is not None:
        err.print(
            "[yellow]warning:[/yellow] --api-key puts the secret where other users of this "
            "machine can read it (ps, shell history); prefer QUIPU_EXTRACTOR_API_KEY"
        )
    if not (base_url and model and api_key):
        # Fall back to the `extractor_*` settings (file, environment) for what is missing.
        from quipu.surfaces.cli.options import settings_or_exit

        settings = settings_or_exit(None, config, server_ok=True)
        base_url = base_url or settings.extractor_base_url
        model = model or settings.extractor_model
        api_key = api_key or settings.extractor_api_key
    if not (base_url and model):
        err.print(
            "[red]--extractor model needs --base-url and --model "
            "(or the extractor_base_url and extractor_model settings)[/red]"
        )
        raise typer.Exit(2)
    return ModelExtractor(base_url=base_url, model=model, api_key=api_key, timeout=timeout)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _render(report: PromotionReport, split: str | None, show_errors: bool) -> None:
    from quipu.evals.promotion import SPLITS

    summary = report.summary(split)
    table = Table("kind", "precision", "recall", "F1", "TP", "predicted", "gold")
    rows: list[tuple[str, dict[str, Any]]] = list(summary["by_kind"].items())
    rows.append(("overall", summary["overall"]))
    for kind, score in rows:
        table.add_row(
            kind,
            _fmt(score["precision"]),
            _fmt(score["recall"]),
            _fmt(score["f1"]),
            str(score["true_positives"]),
            str(score["predicted"]),
            str(score["gold"]),
        )
    console.print(
        f"{report.extractor_id} {report.version}: {split or 'all'} ({summary['sessions']} sessions)"
    )
    console.print(table)
    if split is None:
        for name in SPLITS:
            overall = report.summary(name)["overall"]
            console.print(
                f"{name}: P {_fmt(overall['precision'])}  R {_fmt(overall['recall'])}  "
                f"F1 {_fmt(overall['f1'])}"
            )
    for label, key in (
        ("secret leaks", "secret_leaks"),
        ("injection sessions clean", "injection_sessions_clean"),
        ("nothing-durable sessions clean", "nothing_durable_sessions_clean"),
        ("correction hints naming the old value", "correction_hints_named"),
        ("extraction failures", "failures"),
    ):
        console.print(f"{label}: {summary[key]}")
    bands = ", ".join(
        f"{b['band']}: {_fmt(b['precision'])} of {b['predicted']}" for b in summary["calibration"]
    )
    console.print(f"precision by confidence: {bands}")
    if show_errors:
        for row in report.errors(split):
            console.print(json.dumps(row, ensure_ascii=False))


@app.command()
def promotion(
    extractor: Annotated[
        ExtractorName, typer.Option(help="Which extractor to measure.")
    ] = ExtractorName.DETERMINISTIC,
    split: Annotated[Split, typer.Option(help="Sessions to score: all, dev or test.")] = Split.ALL,
    min_confidence: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="Drop candidates below this, as the promotion gate would."
        ),
    ] = 0.0,
    dataset: Annotated[
        Path | None, typer.Option(help="Another dataset file of the same format.")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Model extractor: OpenAI-compatible base URL with /v1 (default: setting)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model extractor: model name (default: setting).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="Model extractor: API key (default: setting `extractor_api_key`, e.g. "
            "QUIPU_EXTRACTOR_API_KEY; a command line is readable by other users)."
        ),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML settings file for the model extractor.")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Model extractor: seconds per call.")] = 60.0,
    errors: Annotated[
        bool, typer.Option("--errors", help="List misses and false positives.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    longmemeval: Annotated[
        Path | None,
        typer.Option(
            help="Instead: promote a LongMemEval file's sessions and report what promotion "
            "kept (raw turns, old and new promotion in one run; JSON; issue 24)."
        ),
    ] = None,
    locomo: Annotated[
        Path | None,
        typer.Option(help="Instead: the same on a LoCoMo file (JSON; issue 24)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, help="With --longmemeval/--locomo: the first N questions/dialogues."),
    ] = None,
    knowledge_updates: Annotated[
        bool,
        typer.Option(
            "--knowledge-updates",
            help="With --longmemeval: only the labelled knowledge-update pairs: is the newer "
            "value current and the old superseded, per half (tuning, held-out), the rules "
            "before the quantity slots beside the latest (JSON; issue 24).",
        ),
    ] = False,
) -> None:
    """Precision, recall and F1 of an extractor on the labelled promotion sessions (EVAL-2);
    with --longmemeval or --locomo, what promotion keeps of public dialogues (issue 24)."""
    if knowledge_updates and longmemeval is not None:
        _knowledge_updates(longmemeval)
        return
    if longmemeval is not None or locomo is not None:
        _public_promotion(longmemeval, locomo, limit)
        return
    from quipu.evals.promotion import SPLITS, evaluate, load_promotion_dataset
    from quipu.extraction import ModelExtractor

    sessions = load_promotion_dataset(dataset)
    chosen = None if split is Split.ALL else split.value
    sessions = [s for s in sessions if chosen is None or s.split == chosen]
    runner = _extractor(extractor, base_url, model, api_key, timeout, config)
    try:
        report = evaluate(runner, sessions, min_confidence=min_confidence)
    finally:
        if isinstance(runner, ModelExtractor):
            runner.close()
    if as_json:
        data = report.to_dict()
        if chosen is not None:
            data = {k: v for k, v in data.items() if k not in SPLITS and k != "all"}
            data[chosen] = report.summary(chosen)
        if errors:
            data["errors"] = report.errors(chosen)
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return
    _render(report, chosen, errors)


# --------------------------------------------------------------------------------------
# Synthetic retrieval eval (EVAL-1, EVAL-2): the logic is in quipu.evals.synthetic and
# quipu.evals.retrieval_eval
# --------------------------------------------------------------------------------------


@app.command()
def generate(
    out: Annotated[
        Path, typer.Option("--out", help="Folder for corpus.json, queries.json and qrels.json.")
    ],
    seed: Annotated[int, typer.Option(help="Random seed: one seed always writes one corpus.")] = 42,
    conversations: Annotated[
        int, typer.Option(min=1, max=10_000, help="Conversations (about 100 turns each).")
    ] = DEFAULT_CONVERSATIONS,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Write the seeded synthetic retrieval corpus (EVAL-1): multi-session conversations, the
    queries, and the sealed relevance judgements in their own file."""
    from quipu.evals import synthetic

    corpus = synthetic.generate(seed, conversations)
    paths = synthetic.write_corpus(corpus, out)
    sessions = sum(len(chat.sessions) for chat in corpus.conversations)
    turns = sum(len(chat.turns()) for chat in corpus.conversations)
    if as_json:
        summary = {
            "seed": seed,
            "conversations": len(corpus.conversations),
            "sessions": sessions,
            "turns": turns,
            "queries": len(corpus.queries),
            "tiers": corpus.tier_counts(),
            "files": [str(p) for p in paths],
        }
        print(json.dumps(summary))
        return
    console.print(
        f"seed {seed}: {len(corpus.conversations)} conversations, {sessions} sessions, "
        f"{turns} turns, {len(corpus.queries)} queries"
    )
    table = Table("tier", "queries")
    for tier, count in corpus.tier_counts().items():
        table.add_row(tier, str(count))
    console.print(table)
    for path in paths:
        console.print(f"wrote {path}")


@app.command("generate-tech")
def generate_tech(
    out: Annotated[Path, typer.Option("--out", help="Folder for technical_chats.json.")],
    seed: Annotated[int, typer.Option(help="Random seed: one seed always writes one corpus.")] = 31,
    chats: Annotated[
        int, typer.Option(min=1, max=1000, help="Chats (alternately dev and test).")
    ] = 20,
) -> None:
    """Write the seeded technical-chat corpus (EVAL-1, EVAL-3): developers building web apps
    over many sessions, with questions naming their evidence messages; `quipu bench tech
    --data` measures it."""
    from quipu.evals import tech_corpus

    corpus = tech_corpus.generate(seed, chats)
    path = tech_corpus.write(corpus, out)
    messages = sum(len(s.messages) for chat in corpus.chats for s in chat.sessions)
    console.print(
        f"seed {seed}: {len(corpus.chats)} chats, {messages} messages, "
        f"{len(corpus.questions)} questions"
    )
    table = Table("split", *tech_corpus.CATEGORIES)
    for name, row in tech_corpus.split_counts(corpus.questions).items():
        table.add_row(name, *(str(row[c]) for c in tech_corpus.CATEGORIES))
    console.print(table)
    console.print(f"wrote {path}")


def _retrieval_table(report: RetrievalReport) -> Table:
    """Tiers, each tier's variants indented below it, then overall. ``violated`` is the
    share of the row's queries that have must-not-rank-above turns (all of them in the
    tiers that have any) where such a turn came first."""
    k = report.k
    rows: list[tuple[str, TierScore]] = []
    for tier, score in report.tiers.items():
        rows.append((tier, score))
        rows += [
            (f"  {name.partition('/')[2]}", variant)
            for name, variant in report.variants.items()
            if name.startswith(f"{tier}/")
        ]
    rows.append(("overall", report.overall))
    # A light box without edge padding: the columns fit 80 characters with the longest tier.
    table = Table(
        Column("tier", no_wrap=True),
        *("n", f"P@{k}", f"R@{k}", "MRR", f"nDCG@{k}", "top-1", "violated"),
        box=box.SIMPLE,
        pad_edge=False,
        collapse_padding=True,
    )
    for name, score in rows:
        table.add_row(
            name,
            str(score.count),
            _fmt(score.precision),
            _fmt(score.recall),
            _fmt(score.mrr),
            _fmt(score.ndcg),
            _fmt(score.top1),
            _fmt(score.violation_rate),
        )
    return table


def _run_retrieval(
    data: Path, db: Path, k: int, details: bool, overrides: dict[str, str]
) -> RetrievalReport:
    from quipu.evals.datasets import DatasetFormatError
    from quipu.evals.retrieval_eval import run_retrieval_eval

    columns = (TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn())
    try:
        with Progress(*columns, console=console, transient=True) as bars:
            return run_retrieval_eval(
                data, db, k=k, progress=Bars(bars), details=details, overrides=overrides
            )
    except FileExistsError as error:
        raise typer.BadParameter(str(error), param_hint="--db") from None
    except DatasetFormatError as error:
        fail(error, 2)


@app.command()
def retrieval(
    data: Annotated[Path, typer.Option("--data", help="Folder written by `quipu eval generate`.")],
    k: Annotated[
        int, typer.Option("--k", min=1, max=100, help="Results per query: every metric's cut-off.")
    ] = RETRIEVAL_K,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON to this file.")
    ] = None,
    db: Annotated[
        Path | None,
        typer.Option(
            "--db", help="A new SQLite file to ingest into, kept (default: a temporary file)."
        ),
    ] = None,
    details: Annotated[
        bool, typer.Option("--details", help="Add every query's scores and top k to the JSON.")
    ] = False,
    overrides: SettingOverrides = None,
) -> None:
    """Ingest the synthetic corpus through the library, recall every query (it sees only
    id, text and as_of), then score against the sealed judgements: P@k, R@k, MRR, nDCG@k,
    top-1 and order violations per tier (EVAL-2)."""
    settings = parse_overrides(overrides)
    if db is not None:
        report = _run_retrieval(data, db, k, details, settings)
    else:
        with tempfile.TemporaryDirectory(prefix="quipu-eval-") as tmp:
            report = _run_retrieval(data, Path(tmp) / "eval.db", k, details, settings)
    ingest = report.ingest
    console.print(
        f"seed {report.seed}: {report.conversations} conversations, {report.turns} turns, "
        f"{report.queries} queries, k={report.k}"
    )
    console.print(_retrieval_table(report))
    console.print(
        f"ingest: {ingest.memories} memories, {ingest.duplicates} repeated texts, "
        f"{ingest.quarantined} quarantined, refused {dict(sorted(ingest.refused.items()))}; "
        f"{report.ingest_seconds:.1f} s ingest, {report.search_seconds:.1f} s recall"
    )
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
        json_out.write_text(text + "\n", encoding="utf-8")
        console.print(f"wrote {json_out}")


def _public_promotion(longmemeval: Path | None, locomo: Path | None, limit: int | None) -> None:
    """`quipu eval promotion --longmemeval/--locomo`: JSON on stdout, progress on stderr."""
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals.promotion_public import run_locomo, run_longmemeval

    embedder = LocalEmbedder()
    log = Output(stderr=True).log
    out: dict[str, Any] = {}
    if longmemeval is not None:
        out["longmemeval"] = run_longmemeval(longmemeval, embedder, limit=limit, progress=log)
    if locomo is not None:
        out["locomo"] = run_locomo(locomo, embedder, limit=limit, progress=log)
    print(json.dumps(out, ensure_ascii=False, indent=2))


def _knowledge_updates(longmemeval: Path) -> None:
    """`quipu eval promotion --longmemeval FILE --knowledge-updates`: JSON on stdout."""
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals.promotion_ku import run_knowledge_updates

    log = Output(stderr=True).log
    report = run_knowledge_updates(longmemeval, LocalEmbedder(), progress=log)
    print(json.dumps(report, ensure_ascii=False, indent=2))
