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
