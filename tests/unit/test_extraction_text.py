"""The pure helpers of extraction: segmentation, third-person rewriting, relative dates,
and the base types' invariants."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from quipu.core.records import Kind
from quipu.errors import Unavailable
from quipu.extraction import (
    Candidate,
    DeterministicExtractor,
    ExtractionFailed,
    ExtractionFailure,
    ExtractionResult,
    Turn,
)
from quipu.extraction.dates import resolve_relative_dates
from quipu.extraction.rewrite import third_person, third_singular
from quipu.extraction.segment import clauses, sentences


def test_sentences_and_clauses_keep_exact_offsets() -> None:
    content = (
        "Hi! I'm Dana, I live in Lisbon and I work at Farfetch. We deploy to Fly.io; "
        "e.g. on Fridays.\nMy talk is on April 18 and it's about observability — truly."
    )
    pieces = [c for s in sentences(content) for c in clauses(content, s)]
    assert [p.text for p in pieces] == [
        "Hi",
        "I'm Dana",
        "I live in Lisbon",
        "I work at Farfetch",
        "We deploy to Fly.io",
        "e.g. on Fridays",
        "My talk is on April 18",
        "it's about observability",
        "truly",
    ]
    for piece in pieces:
        assert content[piece.start : piece.end] == piece.text


def test_questions_are_recognised_and_steps_stay_whole() -> None:
    content = "What time zone am I in? I'm in Chicago. To deploy, run make, then tag it."
    found = sentences(content)
    assert [s.question for s in found] == [True, False, False]
    assert [c.text for c in clauses(content, found[2])] == ["To deploy, run make, then tag it"]


@pytest.mark.parametrize(
    ("text", "rewritten"),
    [
        ("I live in Lisbon and work at Farfetch", "User lives in Lisbon and works at Farfetch"),
        ("I'm a nurse", "User is a nurse"),
        ("I've been vegetarian", "User has been vegetarian"),
        ("I'd rather have tea", "User would rather have tea"),
        ("I really fly with TAP", "User really flies with TAP"),
        ("I don't like tabs", "User doesn't like tabs"),
        (
            "I usually go camping when I was little",
            "User usually goes camping when they were little",
        ),
        ("my sister and my mom visit me", "User's sister and their mom visit them"),
        ("My wife and I live in Porto", "User and their wife live in Porto"),
        ("we deploy on Fridays", "User's team deploys on Fridays"),
        ("our apartment is small", "User's team's apartment is small"),
        ("I used to work at Spotify", "User used to work at Spotify"),
    ],
)
def test_third_person_rewrites_first_person(text: str, rewritten: str) -> None:
    assert third_person(text) == rewritten


def test_third_person_names_the_family_or_the_assistant_when_asked() -> None:
    assert third_person("we have twin boys", we_as="User's family") == "User's family has twin boys"
    assert third_person("keep your answers short", assistant=True) == "Keep its answers short"


@pytest.mark.parametrize(
    ("verb", "third"),
    [
        ("fly", "flies"),
        ("go", "goes"),
        ("watch", "watches"),
        ("play", "plays"),
        ("was", "was"),
        ("can", "can"),
        ("moved", "moved"),
        ("Have", "Has"),
    ],
)
def test_third_singular(verb: str, third: str) -> None:
    assert third_singular(verb) == third


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("flying tomorrow", "flying on 2024-03-05"),
        ("moved yesterday", "moved on 2024-03-03"),
        ("the party is tonight", "the party is on the night of 2024-03-04"),
        ("back in 3 days", "back on 2024-03-07"),
        ("back in two weeks", "back around 2024-03-18"),
        ("starting next week", "starting in the week of 2024-03-11"),
        ("moved last month", "moved in February 2024"),
        ("retiring next year", "retiring in 2025"),
        ("defending next spring", "defending in spring 2025"),
        ("this winter", "in winter 2024"),
        ("next Friday", "next Friday"),
    ],
)
def test_relative_dates(text: str, resolved: str) -> None:
    at = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)  # a Monday, early spring
    assert resolve_relative_dates(text, at) == resolved
    assert resolve_relative_dates(text, None) == text


def test_seasons_around_the_new_year() -> None:
    january = datetime(2024, 1, 15, tzinfo=UTC)
    assert resolve_relative_dates("next spring", january) == "in spring 2024"
    assert resolve_relative_dates("last winter", january) == "in winter 2022"
    assert resolve_relative_dates("this winter", january) == "in winter 2023"


def test_candidate_validates_itself() -> None:
    good = dict(
        text="User lives in Lisbon",
        kind=Kind.FACT,
        confidence=0.9,
        quote="I live in Lisbon",
        quote_start=0,
        quote_end=16,
        turn_seq=0,
    )
    Candidate(**good)  # type: ignore[arg-type]
    for bad in (
        {"text": " "},
        {"confidence": 1.2},
        {"confidence": float("nan")},
        {"quote_start": 5, "quote_end": 2},
    ):
        with pytest.raises(ValueError):
            Candidate(**{**good, **bad})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Candidate(**{**good, "kind": "fact"})  # type: ignore[arg-type]


def test_a_failed_result_carries_no_candidates_and_raises_a_transient_error() -> None:
    candidate = Candidate("User lives in Lisbon", Kind.FACT, 0.9, "I live in Lisbon", 0, 16, 0)
    failure = ExtractionFailure("timeout", "timed out")
    with pytest.raises(ValueError):
        ExtractionResult("model", "v1", candidates=(candidate,), failure=failure)
    failed = ExtractionResult("model", "v1", failure=failure)
    assert not failed.ok and failed.to_dict()["failure"]["code"] == "timeout"
    with pytest.raises(ExtractionFailed) as caught:
        failed.raise_for_failure()
    assert isinstance(caught.value, Unavailable) and caught.value.code == "extraction_failed"
    ok = ExtractionResult("model", "v1", candidates=(candidate,), dropped={"secret": 1})
    ok.raise_for_failure()
    assert ok.to_dict()["candidates"][0]["text"] == "User lives in Lisbon"
    assert dict(ok.dropped) == {"secret": 1}


def test_turn_roles_and_extract_list() -> None:
    assert Turn("User", "x", 0).is_user and Turn("human", "x", 0).is_user
    assert not Turn("assistant", "x", 0).is_user
    assert DeterministicExtractor.uses_model is False
    found = DeterministicExtractor().extract([Turn("user", "I live in Lisbon.", 0)])
    assert [c.text for c in found] == ["User lives in Lisbon"]
