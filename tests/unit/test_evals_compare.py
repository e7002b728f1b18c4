"""Paired comparison of two bench runs (``quipu bench compare``)."""

from __future__ import annotations

import math

import pytest

from quipu.evals.compare import Run, compare, sign_test
from quipu.evals.datasets import DatasetFormatError


def test_sign_test_is_the_exact_two_sided_binomial() -> None:
    assert sign_test(0, 0) == 1.0
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(7, 4) == sign_test(4, 7)
    assert sign_test(7, 4) == pytest.approx(2 * sum(math.comb(11, i) for i in range(5)) / 2**11)
    assert sign_test(5, 5) == 1.0  # capped: an even split is no evidence either way
    assert 0.0 < sign_test(900, 800) < 0.05  # large counts stay exact, no overflow


def _question(ranked: list[str], gold: list[str], turns: list[str] | None = None) -> dict:  # type: ignore[type-arg]
    return {
        "ranked_sessions": ranked,
        "gold_sessions": gold,
        "ranked_turns": turns or [],
        "gold_turns": [],
    }


def test_compare_counts_the_questions_each_run_gets_right_alone() -> None:
    before = {
        "q1": _question(["a", "b", "c", "d", "e", "f"], ["f"]),  # f at 6: missed at 5
        "q2": _question(["a", "b", "c", "d", "e", "f"], ["a"]),
        "q3": _question(["a", "b", "c", "d", "e", "f"], ["b", "f"]),
    }
    after = {
        "q1": _question(["f", "a", "b", "c", "d", "e"], ["f"]),  # won at 5
        "q2": _question(["b", "c", "d", "e", "f", "a"], ["a"]),  # lost at 5
        "q3": _question(["a", "b", "c", "d", "e", "f"], ["b", "f"]),  # same
    }
    rows = {row.metric: row for row in compare(Run(before, 6), Run(after, 6), ks=(5, 6))}
    assert set(rows) == {"session all@5", "session all@6", "session any@5", "session any@6"}
    at5 = rows["session all@5"]
    assert (at5.won, at5.lost) == (("q1",), ("q2",))
    assert (at5.before, at5.after) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert at5.p_value == 1.0
    at6 = rows["session all@6"]
    assert (at6.won, at6.lost, at6.before) == ((), (), 1.0)
    assert rows["session any@5"].won == ("q1",)


def test_compare_refuses_runs_of_different_questions_or_too_shallow() -> None:
    one = Run({"q1": _question(["a"], ["a"])}, 10)
    with pytest.raises(DatasetFormatError, match="different questions"):
        compare(one, Run({"q2": _question(["a"], ["a"])}, 10))
    with pytest.raises(DatasetFormatError, match="deeper"):
        compare(one, Run(one.questions, 3), ks=(5,))
