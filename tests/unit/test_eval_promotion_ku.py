"""The knowledge-update pairs of issue 24 (``evals/promotion_ku.py``): labelled by hand, split
into a tuning and a held-out half over groups of shared statements with a fixed seed, so a
re-run reports the same halves and no statement is in both."""

from __future__ import annotations

from pathlib import Path

from quipu.evals.fact_sample import rates
from quipu.evals.promotion_ku import load_pairs, split


def test_issue24_pairs_split_by_group_with_a_fixed_seed() -> None:
    pairs = load_pairs()
    assert len(pairs) == 14 and len({p.question_id for p in pairs}) == 14
    halves = split(pairs)
    tuning = {p.group for p in halves["tuning"]}
    held_out = {p.group for p in halves["held_out"]}
    assert not tuning & held_out and len(tuning) == 7 and len(held_out) == 6
    assert sorted(p.question_id for p in halves["held_out"]) == [
        "031748ae_abs",
        "6a1eabeb",
        "6aeb4375",
        "6aeb4375_abs",
        "71315a70",
        "852ce960",
        "89941a93",
    ]
    for p in pairs:  # each label names its two values and the attribute they measure
        assert p.old.pattern != p.new.pattern and p.old_session != p.new_session


def test_issue24_new_facts_of_extractor_15_judged() -> None:
    judged = rates(
        Path(__file__).parents[1] / "data" / "promotion_judged_facts_quantities_v15.json"
    )
    assert judged["judged"] == 22 and judged["version"] == "1.5"
    assert judged["faithful_durable"]["share"] == 0.773
    assert judged["distorted_or_wrongly_stored"] == 0.045
