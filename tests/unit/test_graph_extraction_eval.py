"""The hand-labelled extraction set (issue 26, GRAPH-1): at least 300 sentences from the public
dialogues, each with its source id, scored by :mod:`quipu.evals.graph_extraction`. The floors
sit just under the figures in docs/benchmarks.md, so a change that makes extraction worse fails
here."""

from __future__ import annotations

import re
from pathlib import Path

from quipu.core.graph import ENTITY_TYPES
from quipu.evals.graph_extraction import load, score

LABELS = Path(__file__).resolve().parents[1] / "data" / "graph_extraction_labels.jsonl"
SOURCE = re.compile(r"(locomo:conv-\d+:D\d+:\d+|longmemeval:[\w-]+:t\d+):s\d+")


def test_graph_001_labelled_set_is_large_sourced_and_well_formed() -> None:
    rows = load(LABELS)
    assert len(rows) >= 300
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert SOURCE.fullmatch(row["id"]), row["id"]
        assert all(kind in ENTITY_TYPES for _, kind in row["entities"]), row["id"]
        assert all(len(fact) == 3 for fact in row["facts"]), row["id"]


def test_graph_001_extraction_scores_hold_on_the_labelled_set() -> None:
    found = score(load(LABELS))
    assert found["sentences"] >= 300
    assert found["entity"]["precision"] >= 0.70
    assert found["entity"]["recall"] >= 0.93
    assert found["fact"]["precision"] >= 0.90
    assert found["fact"]["recall"] >= 0.35
