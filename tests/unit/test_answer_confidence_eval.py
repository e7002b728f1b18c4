"""The calibration arithmetic of ``python -m quipu.evals.answer_confidence`` (issue 25,
RECALL-9: answer_confidence calibrated on a labelled set, its accuracy reported): pure, on
small hand-made sets whose answers are known."""

from __future__ import annotations

import math

from quipu.evals.answer_confidence import (
    Labelled,
    accuracy,
    accuracy_cut,
    auc,
    evaluate,
    youden_cut,
)


def _set(pairs: list[tuple[float, bool]], group: int = 0) -> list[Labelled]:
    return [Labelled(group, s, y) for s, y in pairs]


def test_recall_009_auc_and_cuts_on_a_known_set() -> None:
    clean = _set([(1.0, False), (2.0, False), (3.0, True), (4.0, True)])
    assert auc(clean) == 1.0 and accuracy_cut(clean) == 3.0 and accuracy(clean, 3.0) == 1.0
    assert youden_cut(clean) == 3.0
    # a rare positive: never answering is the most accurate, Youden still finds the split
    rare = _set([(1.0, False), (2.0, False), (2.5, False), (3.0, True), (3.5, False)] * 2)
    assert accuracy_cut(rare) == math.inf and accuracy(rare, math.inf) == 0.8
    assert youden_cut(rare) == 3.0
    assert math.isnan(auc(_set([(1.0, True)])))
    tied = _set([(1.0, True), (1.0, False)])
    assert auc(tied) == 0.5


def test_recall_009_evaluate_leaves_each_group_out() -> None:
    items = _set([(1.0, False), (12.0, True), (4.0, True)], 0) + _set(
        [(0.5, False), (11.0, True), (3.5, False)], 1
    )
    found = evaluate(items)
    assert found["questions"] == 6 and found["conversations"] == 2
    assert [f["held_out"] for f in found["folds"]] == [0, 1]
    assert found["base_rate"] == 0.5 and found["accuracy_never_answer"] == 0.5
    per = found["evidence_rate_per_verdict_in_use"]
    assert per["answer"] == {"questions": 2, "top_is_evidence": 1.0}  # 12.0 and 11.0
    assert sum(v["questions"] for v in per.values()) == 6
