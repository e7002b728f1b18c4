"""The public-dialogue promotion eval reads a LongMemEval file and scores evidence captured as
a fact, old rules beside new (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path

from quipu.evals.promotion_public import extraction_capture


def test_issue24_extraction_capture_scores_old_rules_beside_new(tmp_path: Path) -> None:
    turns = [
        {"role": "user", "content": "I spent 70 hours restoring my oak desk.", "has_answer": True},
        {"role": "assistant", "content": "That is a lot of work, well done."},
    ]
    record = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "How many hours did I spend restoring my desk?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": "70 hours",
        "answer_session_ids": ["s1"],
        "haystack_dates": ["2023/05/20 (Sat) 14:30"],
        "haystack_session_ids": ["s1"],
        "haystack_sessions": [turns],
    }
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([record]))
    result = extraction_capture(path)
    assert result["old"]["all"] == {
        "questions": 1,
        "fact_from_evidence": 0.0,
        "fact_with_answer": 0.0,
    }
    assert result["new"]["single-session-user"] == {
        "questions": 1,
        "fact_from_evidence": 1.0,
        "fact_with_answer": 1.0,
    }


def _one_session_file(tmp_path: Path, *contents: str) -> Path:
    turns = [{"role": "user", "content": c} for c in contents]
    record = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": "",
        "answer_session_ids": ["s1"],
        "haystack_dates": ["2023/05/20 (Sat) 14:30"],
        "haystack_session_ids": ["s1"],
        "haystack_sessions": [turns],
    }
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([record]))
    return path


def test_issue24_fact_sample_draws_from_the_gate_with_source_ids(tmp_path: Path) -> None:
    from quipu.evals.fact_sample import candidate_pool, sample

    path = _one_session_file(
        tmp_path, "I live in Lisbon.", "I think I'll go with the quinoa salad jars."
    )
    assert [f["text"] for f in candidate_pool(path, revision=2)] == [
        "User lives in Lisbon",
        "User will go with the quinoa salad jars",
    ]
    (fact,) = sample(path, n=5)
    assert fact == {
        "source": "longmemeval/s1/1",
        "kind": "fact",
        "text": "User lives in Lisbon",
        "quote": "I live in Lisbon",
    }


def test_issue24_judged_facts_rates_as_documented() -> None:
    """The hand labels kept in the repo, and the rates docs/benchmarks.md quotes from them."""
    from quipu.evals.fact_sample import rates

    data = Path(__file__).parents[1] / "data"
    old = rates(data / "promotion_judged_facts.json")
    assert old["judged"] == 160 and old["faithful_durable"]["share"] == 0.625
    first = rates(data / "promotion_judged_facts_r3.json")
    assert first["judged"] == 170 and first["version"] == "1.3"
    assert first["faithful_durable"]["share"] == 0.806
    assert first["distorted_or_wrongly_stored"] == 0.041
    new = rates(data / "promotion_judged_facts_r4.json")
    assert new["judged"] == 160 and new["version"] == "1.4"
    assert new["faithful_durable"]["share"] == 0.8
    assert new["distorted_or_wrongly_stored"] == 0.031
