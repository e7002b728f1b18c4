"""Paired comparison of two public-benchmark runs, question by question.

Two runs of ``quipu bench locomo|longmemeval --details`` on the same data (say, a setting off
and on) differ in a few questions. A mean moving by 0.002 can be three questions won and none
lost, or forty won and thirty-seven lost. This counts, for each metric, the questions one run
gets right and the other does not, and gives the exact two-sided sign test over them: the
chance of a split at least that uneven if the change made no difference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quipu.evals.datasets import DatasetFormatError
from quipu.evals.metrics import recall_all_at_k, recall_any_at_k

#: Metrics a comparison reads from each question's ``per_question`` entry: (level, kind).
LEVELS = {"session": ("ranked_sessions", "gold_sessions"), "turn": ("ranked_turns", "gold_turns")}
KINDS = ("all", "any")


@dataclass(frozen=True)
class Paired:
    metric: str
    before: float
    """Mean of the metric over the questions, first run."""
    after: float
    won: tuple[str, ...]
    """Question ids the second run gets right and the first does not."""
    lost: tuple[str, ...]
    p_value: float
    """Exact two-sided sign test over ``won`` and ``lost`` (1.0 when both are empty)."""


def sign_test(won: int, lost: int) -> float:
    """Two-sided exact binomial test of ``won`` against ``lost`` at p = 1/2."""
    n = won + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(won, lost) + 1))
    return min(1.0, 2.0 * (tail / (1 << n)))


@dataclass(frozen=True)
class Run:
    questions: Mapping[str, Mapping[str, Any]]
    """Per-question entries by question id."""
    depth: int
    """How deep each saved ranking goes (the run's largest k; shorter where a haystack holds
    fewer sessions or turns)."""


def load_run(path: Path, system: str) -> Run:
    """``system``'s per-question entries of a bench JSON."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DatasetFormatError(f"{path}: not a readable bench JSON ({error})") from None
    systems = report.get("systems") if isinstance(report, dict) else None
    if not isinstance(systems, dict) or system not in systems:
        names = ", ".join(sorted(systems)) if isinstance(systems, dict) else "none"
        raise DatasetFormatError(f"{path}: no system {system!r} (it has: {names})")
    rows = systems[system].get("per_question")
    if not isinstance(rows, list):
        raise DatasetFormatError(f"{path}: no per-question results; run the bench with --details")
    out: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("question_id"), str):
            raise DatasetFormatError(f"{path}: a per-question entry has no question_id")
        out[row["question_id"]] = row
    ks = report.get("ks")
    if not isinstance(ks, list) or not all(isinstance(k, int) for k in ks) or not ks:
        raise DatasetFormatError(f"{path}: no list of cut-offs (ks)")
    return Run(out, max(ks))


def compare(first_run: Run, second_run: Run, ks: Sequence[int] = (5, 10)) -> list[Paired]:
    """Per metric (``session all@k`` and ``any@k``, then the same for turns), the paired
    outcome of ``second_run`` against ``first_run``; both must hold the same questions."""
    if max(ks) > min(first_run.depth, second_run.depth):
        raise DatasetFormatError(f"k={max(ks)} is deeper than the runs' saved rankings")
    before, after = first_run.questions, second_run.questions
    if set(before) != set(after):
        only = sorted(set(before) ^ set(after))
        raise DatasetFormatError(
            f"the runs hold different questions ({len(only)} in one only, e.g. {only[0]!r})"
        )
    ids = sorted(before)
    out: list[Paired] = []
    for level, (ranked_key, gold_key) in LEVELS.items():
        scored = [q for q in ids if before[q].get(gold_key)]
        if not scored:
            continue
        for kind in KINDS:
            score = recall_all_at_k if kind == "all" else recall_any_at_k
            for k in ks:
                first = {q: score(before[q][ranked_key], before[q][gold_key], k) for q in scored}
                second = {q: score(after[q][ranked_key], after[q][gold_key], k) for q in scored}
                won = tuple(q for q in scored if second[q] > first[q])
                lost = tuple(q for q in scored if second[q] < first[q])
                out.append(
                    Paired(
                        metric=f"{level} {kind}@{k}",
                        before=sum(first.values()) / len(scored),
                        after=sum(second.values()) / len(scored),
                        won=won,
                        lost=lost,
                        p_value=sign_test(len(won), len(lost)),
                    )
                )
    return out
