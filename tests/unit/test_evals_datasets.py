"""Benchmark loaders (EVAL-3) on small inline files shaped like the real ones.

One test per dataset also reads the real files from shared/data when they are present.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from quipu.evals.datasets import (
    DatasetFormatError,
    load_locomo,
    load_longmemeval,
    parse_evidence_ids,
    parse_locomo_datetime,
    parse_longmemeval_datetime,
)

# shared/ sits beside the checkout (and at /work/shared on a developer's machine)
DATA_DIRS = (
    Path(__file__).resolve().parents[3] / "shared" / "data",
    Path("/work/shared/data"),
)


def _real(relative: str) -> Path:
    """A real benchmark file from shared/data; the test is skipped when it is absent."""
    for data_dir in DATA_DIRS:
        if (data_dir / relative).is_file():
            return data_dir / relative
    pytest.skip(f"benchmark file {relative} is not present")


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- LoCoMo ------------------------------------------------------------------------------


def _locomo_record() -> dict[str, Any]:
    return {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "\nLook at my new bowl. ",
                    "img_url": ["https://example.invalid/bowl.jpg"],
                    "blip_caption": "a photo of a bowl with a colorful design",
                    "query": "ceramic bowl",
                },
            ],
            "session_10_date_time": "12:09 am on 13 September, 2023",
            "session_10": [
                {"speaker": "Caroline", "dia_id": "D10:1", "text": "Back from camping."},
                {"speaker": "Melanie", "dia_id": "D10:2", "text": "How was it?"},
                {"speaker": "Caroline", "dia_id": "D10:3", "text": "Rainy."},
            ],
            "session_2_date_time": "12:30 pm on 1 June, 2023",
            "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": "Hi."}],
            # a date whose session is missing (as in conv-26): ignored
            "session_3_date_time": "9:00 am on 2 June, 2023",
        },
        "qa": [
            {"question": "Q1", "answer": "bowl", "evidence": ["D1:2"], "category": 4},
            {"question": "Q2", "answer": 2022, "evidence": ["D1:2; D10:3"], "category": 2},
            {"question": "Q3", "answer": "a", "evidence": ["D10:1 D2:1 D1:1"], "category": 3},
            {"question": "Q4", "answer": "a", "evidence": ["D:10:2", "D", "D10:03"], "category": 1},
            {"question": "Q5", "answer": "a", "evidence": ["D2:9", "D1:1"], "category": 1},
            {"question": "Q6", "answer": "a", "evidence": [], "category": 3},
            {
                "question": "Q7",
                "adversarial_answer": "camping",
                "evidence": ["D10:1"],
                "category": 5,
            },
            {"question": "Q8", "answer": "a", "evidence": ["D7:1", "D"], "category": 1},
        ],
        "event_summary": {},
        "observation": {},
        "session_summary": {},
    }


def test_locomo_turns_sessions_and_times(tmp_path: Path) -> None:
    [conversation] = load_locomo(_write(tmp_path, [_locomo_record()]))
    assert conversation.sample_id == "conv-1"
    assert (conversation.speaker_a, conversation.speaker_b) == ("Caroline", "Melanie")
    assert [session.number for session in conversation.sessions] == [1, 2, 10]
    assert [turn.turn_id for turn in conversation.turns] == [
        "D1:1",
        "D1:2",
        "D2:1",
        "D10:1",
        "D10:2",
        "D10:3",
    ]
    first, photo = conversation.turns[:2]
    assert first.text == "Caroline: Hey Mel!"
    assert first.session == 1
    assert first.observed_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert first.image_caption is None
    assert photo.text == (
        "Melanie: Look at my new bowl. [image: a photo of a bowl with a colorful design]"
    )
    assert photo.image_caption == "a photo of a bowl with a colorful design"
    assert photo.speaker == "Melanie"
    late = conversation.turns[3]
    assert late.session == 10
    assert late.observed_at == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)  # 12:09 am
    assert conversation.turns[2].observed_at == datetime(2023, 6, 1, 12, 30, tzinfo=UTC)
    assert conversation.turn_to_session()["D10:2"] == 10


def test_locomo_questions_and_robust_evidence(tmp_path: Path) -> None:
    [conversation] = load_locomo(_write(tmp_path, [_locomo_record()]))
    q = {question.question: question for question in conversation.questions}
    assert q["Q1"].question_id == "conv-1/1"
    assert q["Q1"].evidence == ("D1:2",)
    assert q["Q1"].evidence_sessions == (1,)
    assert q["Q1"].answer == "bowl"
    # a bare-number answer becomes a string; two ids in one string are split
    assert q["Q2"].answer == "2022"
    assert q["Q2"].evidence == ("D1:2", "D10:3")
    assert q["Q2"].evidence_sessions == (1, 10)
    assert q["Q2"].raw_evidence == ("D1:2; D10:3",)
    assert q["Q3"].evidence == ("D10:1", "D2:1", "D1:1")
    assert q["Q3"].evidence_sessions == (1, 2, 10)
    # stray colon, bare "D" and zero padding
    assert q["Q4"].evidence == ("D10:2", "D10:3")
    assert q["Q4"].evidence_sessions == (10,)
    assert q["Q4"].unresolved_evidence == ("D",)
    # a turn the session does not hold: not turn-level gold, but its session counts
    assert q["Q5"].evidence == ("D1:1",)
    assert q["Q5"].evidence_sessions == (1, 2)
    assert q["Q5"].unresolved_evidence == ("D2:9",)
    # a session the conversation does not hold counts nowhere
    assert q["Q8"].evidence == ()
    assert q["Q8"].evidence_sessions == ()
    assert not q["Q8"].is_scored
    # no evidence, or adversarial: not scored
    assert not q["Q6"].is_scored
    assert q["Q7"].answer is None
    assert q["Q7"].adversarial_answer == "camping"
    assert q["Q7"].category == 5
    assert not q["Q7"].is_scored
    assert [question.question for question in conversation.scored_questions()] == [
        "Q1",
        "Q2",
        "Q3",
        "Q4",
        "Q5",
    ]


def test_parse_evidence_ids() -> None:
    assert parse_evidence_ids(["D8:6; D9:17", "D:11:26", "D", "D30:05", "D8:6"]) == [
        (8, 6),
        (9, 17),
        (11, 26),
        (30, 5),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:19 am on 4 January, 2024", datetime(2024, 1, 4, 0, 19, tzinfo=UTC)),
        ("12:05 pm on 4 Jan, 2024", datetime(2024, 1, 4, 12, 5, tzinfo=UTC)),
    ],
)
def test_parse_locomo_datetime(text: str, expected: datetime) -> None:
    assert parse_locomo_datetime(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "13:00 pm on 8 May, 2023", "1:56 pm on 31 Smarch, 2023", "1:56 pm on 30 February, 2023"],
)
def test_parse_locomo_datetime_rejects_garbage(text: str) -> None:
    with pytest.raises(DatasetFormatError):
        parse_locomo_datetime(text)


def test_locomo_format_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match="list of conversations"):
        load_locomo(_write(tmp_path, {"not": "a list"}))
    record = _locomo_record()
    del record["conversation"]["session_2_date_time"]
    with pytest.raises(DatasetFormatError, match="session_2_date_time"):
        load_locomo(_write(tmp_path, [record]))
    record = _locomo_record()
    record["qa"][0]["category"] = "4"
    with pytest.raises(DatasetFormatError, match="category"):
        load_locomo(_write(tmp_path, [record]))
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="not valid JSON"):
        load_locomo(bad)


def test_real_locomo_counts() -> None:
    conversations = load_locomo(_real("locomo/locomo10.json"))
    assert len(conversations) == 10
    questions = [q for conversation in conversations for q in conversation.questions]
    assert len(questions) == 1986
    by_category = {c: sum(q.category == c for q in questions) for c in range(1, 6)}
    assert by_category == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    scored = [q for conversation in conversations for q in conversation.scored_questions()]
    assert len(scored) == 1536
    assert sum(len(conversation.turns) for conversation in conversations) == 5882
    for conversation in conversations:
        turn_ids = set(conversation.turn_to_session())
        for question in conversation.scored_questions():
            assert set(question.evidence) <= turn_ids
            assert question.evidence  # every scored question keeps a gold turn
    assert len({q.question_id for q in questions}) == len(questions)
    # the malformed evidence strings of the real file resolve as documented
    q = next(q for q in questions if q.raw_evidence == ("D8:6; D9:17",))
    assert q.evidence == ("D8:6", "D9:17")
    q = next(q for q in questions if "D30:05" in q.raw_evidence)
    assert q.evidence == ("D30:5",)


# --- LongMemEval -------------------------------------------------------------------------


def _lme_record(question_id: str = "q1", **overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "question_id": question_id,
        "question_type": "multi-session",
        "question": "How many bikes do I own?",
        "question_date": "2023/05/30 (Tue) 23:40",
        "answer": 3,
        "answer_session_ids": ["answer_a", "answer_b", "answer_c"],
        "haystack_dates": [
            "2023/05/20 (Sat) 02:21",
            "2023/05/21 (Sun) 10:00",
            "2023/05/22 (Mon) 11:30",
            "2023/05/23 (Tue) 12:45",
            "2023/05/24 (Wed) 08:05",
        ],
        "haystack_session_ids": ["noise_1", "answer_a", "answer_b", "answer_c", "noise_1"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Tell me a joke."},
                {"role": "assistant", "content": "Why did the chicken..."},
            ],
            [
                {"role": "user", "content": "I bought a road bike.", "has_answer": True},
                {"role": "assistant", "content": "Nice!", "has_answer": False},
                {"role": "user", "content": "And a helmet.", "has_answer": False},
            ],
            [
                {"role": "user", "content": "Which tyres?", "has_answer": False},
                {"role": "assistant", "content": "You have two bikes.", "has_answer": True},
            ],
            [
                {"role": "assistant", "content": "Hello", "has_answer": False},
                {"role": "user", "content": "My third bike arrived.", "has_answer": True},
            ],
            [
                {"role": "user", "content": "Tell me a joke."},
                {"role": "assistant", "content": "Why did the chicken..."},
            ],
        ],
    }
    record.update(overrides)
    return record


def test_longmemeval_fields_and_turn_ids(tmp_path: Path) -> None:
    [question] = load_longmemeval(_write(tmp_path, [_lme_record()]))
    assert question.question_id == "q1"
    assert question.question_type == "multi-session"
    assert question.answer == "3"
    assert question.question_date == datetime(2023, 5, 30, 23, 40, tzinfo=UTC)
    assert question.answer_session_ids == ("answer_a", "answer_b", "answer_c")
    assert len(question.sessions) == 5  # the repeated session stays in the haystack
    session = question.sessions[1]
    assert session.session_id == "answer_a"
    assert session.observed_at == datetime(2023, 5, 21, 10, 0, tzinfo=UTC)
    assert [turn.turn_id for turn in session.turns] == ["answer_a_1", "answer_a_2", "answer_a_3"]
    assert [turn.role for turn in session.turns] == ["user", "assistant", "user"]
    assert session.turns[0].has_answer
    assert not question.sessions[0].turns[0].has_answer  # absent means False


def test_longmemeval_protocol_helpers(tmp_path: Path) -> None:
    [question] = load_longmemeval(_write(tmp_path, [_lme_record()]))
    # user turns only, positions counted over all turns, the repeated session once
    assert [turn.turn_id for turn in question.indexed_turns()] == [
        "noise_1_1",
        "answer_a_1",
        "answer_a_3",
        "answer_b_1",
        "answer_c_2",
    ]
    assert question.turn_to_session()["answer_c_2"] == "answer_c"
    # answer_b's only has_answer turn is the assistant's: not gold
    assert question.gold_sessions() == {"answer_a", "answer_c"}
    assert question.gold_turns() == {"answer_a_1", "answer_c_2"}
    assert question.is_scored()
    assert not question.is_abstention


def test_longmemeval_unscored_questions(tmp_path: Path) -> None:
    abstention = _lme_record("q2_abs")
    assistant_only = _lme_record(
        "q3",
        question_type="single-session-assistant",
        answer_session_ids=["answer_b"],
    )
    questions = load_longmemeval(_write(tmp_path, [abstention, assistant_only]))
    assert questions[0].is_abstention
    assert not questions[0].is_scored()
    assert questions[1].gold_sessions() == frozenset()
    assert not questions[1].is_scored()


def test_longmemeval_format_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match="differ in length"):
        load_longmemeval(_write(tmp_path, [_lme_record(haystack_dates=["2023/05/20 (Sat) 02:21"])]))
    with pytest.raises(DatasetFormatError, match="question_date"):
        record = _lme_record()
        del record["question_date"]
        load_longmemeval(_write(tmp_path, [record]))
    with pytest.raises(DatasetFormatError, match="LongMemEval date"):
        load_longmemeval(_write(tmp_path, [_lme_record(question_date="May 30")]))


def test_parse_longmemeval_datetime() -> None:
    assert parse_longmemeval_datetime("2023/04/10 (Mon) 17:50") == datetime(
        2023, 4, 10, 17, 50, tzinfo=UTC
    )
    with pytest.raises(DatasetFormatError):
        parse_longmemeval_datetime("2023/02/30 (Thu) 10:00")


def test_real_longmemeval_subset_counts() -> None:
    questions = load_longmemeval(_real("longmemeval/longmemeval_s_subset_balanced.json"))
    assert len(questions) == 74
    assert sum(q.is_abstention for q in questions) == 26
    scored = [q for q in questions if q.is_scored()]
    # the 8 single-session-assistant questions have their evidence in assistant turns only
    assert len(scored) == 40
    assert {q.question_type for q in questions if not q.is_abstention and not q.is_scored()} == {
        "single-session-assistant"
    }
    for question in scored:
        assert question.gold_sessions() <= set(question.answer_session_ids)
        assert all(turn.role == "user" for turn in question.indexed_turns())
        turn_ids = [turn.turn_id for turn in question.indexed_turns()]
        assert len(turn_ids) == len(set(turn_ids))
    mini = load_longmemeval(_real("longmemeval/longmemeval_s_mini12.json"))
    assert len(mini) == 12
    assert sum(q.is_scored() for q in mini) == 10
