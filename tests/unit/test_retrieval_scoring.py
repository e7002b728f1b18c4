"""Score fusion and the temporal windows of recall: pure functions, worked by hand."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from quipu.core.query import Candidate, Filters
from quipu.retrieval.bm25 import SessionContext
from quipu.retrieval.fusion import score_fusion, session_aggregate
from quipu.retrieval.temporal import SLACK, TimeWindow, query_windows, window_filters


def _at(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


# --- score fusion ------------------------------------------------------------------------


def test_score_fusion_weights_cosine_and_bm25_scaled_by_its_best_match() -> None:
    semantic = [Candidate(1, 0.8), Candidate(2, 0.6), Candidate(3, 0.4)]
    text = [Candidate(3, 10.0), Candidate(4, 5.0)]
    fused = score_fusion(semantic, text, weight_vector=0.7, weight_text=0.3)
    scores = {key: score for key, score, _ in fused}
    # 1: 0.7*0.8 = 0.56; 2: 0.7*0.6 = 0.42; 3: 0.7*0.4 + 0.3*1.0 = 0.58;
    # 4 is not in the vector list, so it gets that list's lowest cosine: 0.7*0.4 + 0.3*0.5 = 0.43
    assert scores == pytest.approx({1: 0.56, 2: 0.42, 3: 0.58, 4: 0.43})
    assert [key for key, _, _ in fused] == [3, 1, 4, 2]
    labels = {key: found for key, _, found in fused}
    assert labels == {1: ("semantic",), 2: ("semantic",), 3: ("semantic", "text"), 4: ("text",)}


def test_score_fusion_boost_lifts_and_labels_and_ties_break_on_key() -> None:
    semantic = [Candidate(9, 0.5), Candidate(2, 0.5)]
    fused = score_fusion(semantic, [], weight_vector=1.0, weight_text=1.0, boosts={9: 0.2, 7: 1})
    assert [(key, round(score, 6), found) for key, score, found in fused] == [
        (9, 0.7, ("semantic", "time")),
        (2, 0.5, ("semantic",)),
    ]
    tie = score_fusion(semantic, [], weight_vector=1.0, weight_text=1.0)
    assert [key for key, _, _ in tie] == [2, 9]


def test_score_fusion_without_vectors_ranks_by_bm25_alone() -> None:
    fused = score_fusion(
        [], [Candidate(5, 2.0), Candidate(6, 4.0)], weight_vector=0.7, weight_text=0.3
    )
    assert [(key, round(score, 6)) for key, score, _ in fused] == [(6, 0.3), (5, 0.15)]
    assert score_fusion([], [], weight_vector=0.7, weight_text=0.3) == []


# --- temporal windows --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did she paint on October 13, 2023?", _at(2023, 10, 13), _at(2023, 10, 14)),
        ("What did Gina find on 1 February, 2023?", _at(2023, 2, 1), _at(2023, 2, 2)),
        ("the 3rd of June 2023 party", _at(2023, 6, 3), _at(2023, 6, 4)),
        ("deploy on 2024-02-29", _at(2024, 2, 29), _at(2024, 3, 1)),
        ("What setback did she face in October 2023?", _at(2023, 10, 1), _at(2023, 11, 1)),
        ("plans for Dec. 2023", _at(2023, 12, 1), _at(2024, 1, 1)),
        ("How often did we meet in 2022?", _at(2022, 1, 1), _at(2023, 1, 1)),
    ],
)
def test_query_windows_read_absolute_dates(query: str, start: datetime, end: datetime) -> None:
    assert query_windows(query) == [TimeWindow(start, end + SLACK)]


@pytest.mark.parametrize(
    "query",
    [
        "When did she go camping in June?",  # no year: ambiguous, not read
        "last week",  # relative: depends on when the question is asked
        "I paid 2000 dollars",
        "on 2023-02-30",  # not a date
        "What is my favourite colour?",
    ],
)
def test_query_windows_ignore_what_is_not_an_absolute_date(query: str) -> None:
    assert query_windows(query) == []


def test_the_most_specific_form_wins() -> None:
    assert query_windows("on 13 October 2023, in October 2023") == [
        TimeWindow(_at(2023, 10, 13), _at(2023, 10, 14) + SLACK)
    ]


def test_window_filters_intersect_with_the_callers_window() -> None:
    window = TimeWindow(_at(2023, 5, 1), _at(2023, 6, 8))
    narrowed = window_filters(Filters(observed_after=_at(2023, 5, 10)), window)
    assert narrowed is not None
    assert (narrowed.observed_after, narrowed.observed_before) == (
        _at(2023, 5, 10),
        _at(2023, 6, 8),
    )
    assert window_filters(Filters(observed_before=_at(2023, 1, 1)), window) is None


def test_session_aggregate_raises_sessions_with_several_near_best_candidates() -> None:
    fused = [(1, 0.80, ("semantic",)), (2, 0.79, ("text",)), (3, 0.78, ("semantic",)),
             (4, 0.70, ("semantic",))]  # fmt: skip
    # 1 is alone in its session, 2 and 3 share one, 4 has no session
    out = session_aggregate(fused, {1: "a", 2: "b", 3: "b"}, weight=1.0, tau=0.05)
    scores = {key: score for key, score, _ in out}
    assert scores[1] == pytest.approx(0.80) and scores[4] == pytest.approx(0.70)
    gain = 0.05 * math.log(1 + math.exp(-0.01 / 0.05))
    assert scores[2] == pytest.approx(0.79 + gain) and scores[3] == pytest.approx(0.78 + gain)
    assert [key for key, _, _ in out] == [2, 3, 1, 4]  # the pair now leads
    assert session_aggregate(fused, {}, weight=1.0) == fused  # nothing to aggregate


def test_session_context_is_the_previous_memory_of_another_family() -> None:

    chain = SessionContext()
    s = ("t1", "agent", "alice", "s-1")
    assert chain.next(s, "a", ["climb", "gym"]) == []
    assert chain.next(s, "b", ["twice", "week"]) == ["climb", "gym"]
    assert chain.next(None, "c", ["solo"]) == []  # no session, no context
    assert chain.next(("t1", "agent", "alice", "s-2"), "d", ["ferri"]) == []
    # a new version of b keeps b's context, not b's own old keys
    assert chain.next(s, "b", ["three", "week"]) == ["climb", "gym"]
    assert chain.next(s, "e", ["sister"]) == ["three", "week"]
