"""`quipu eval …`: quality measurements. They measure and never gate anything."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from quipu.evals.promotion import SPLITS, PromotionReport, evaluate, load_promotion_dataset
from quipu.extraction import DeterministicExtractor, Extractor, ModelExtractor

app = typer.Typer(help="Quality evaluations (they measure, never gate).", no_args_is_help=True)
console = Console()
err = Console(stderr=True)


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
    if name is ExtractorName.DETERMINISTIC:
        return DeterministicExtractor()
    if not (base_url and model):
        # Fall back to the `extractor_*` settings (file, environment) for what is missing.
        from quipu.surfaces.cli.options import settings_or_exit

        settings = settings_or_exit(None, config)
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
        str | None, typer.Option(help="Model extractor: API key (default: setting).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML settings file for the model extractor.")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Model extractor: seconds per call.")] = 60.0,
    errors: Annotated[
        bool, typer.Option("--errors", help="List misses and false positives.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Precision, recall and F1 of an extractor on the labelled promotion sessions (EVAL-2)."""
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
