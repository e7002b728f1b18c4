"""The public-dialogue promotion eval reads a LongMemEval file and scores evidence captured as
a fact, old rules beside new (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path

from quipu.embeddings.local import LocalEmbedder
from quipu.evals.promotion_public import extraction_capture, run_longmemeval


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


def test_issue24_eval_promotion_reports_each_target_old_beside_new(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """`quipu eval promotion --longmemeval` in one run: every issue-24 target for the old and
    the new extractor side by side, figure beside goal, with the raw turns as the anchor."""
    turns = [
        {"role": "user", "content": "I spent 70 hours restoring my oak desk.", "has_answer": True},
        {"role": "assistant", "content": "That is a lot of work, well done."},
    ]
    other = [
        {"role": "user", "content": "I am planning a trip to Kyoto in April."},
        {"role": "assistant", "content": "Kyoto in April has the cherry blossoms."},
    ]
    record = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "How many hours did I spend restoring my desk?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": "70 hours",
        "answer_session_ids": ["s1"],
        "haystack_dates": ["2023/05/20 (Sat) 14:30", "2023/05/21 (Sun) 09:00"],
        "haystack_session_ids": ["s1", "s2"],
        "haystack_sessions": [turns, other],
    }
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([record]))
    report = run_longmemeval(path, local_embedder)
    targets = report["targets"]
    assert {"old", "new"} <= set(targets) and "raw" not in targets
    for arm in ("old", "new"):
        rows = targets[arm]
        assert {
            "answer_session_top5",
            "storage_vs_raw",
            "fact_from_evidence:single-session-user",
            "knowledge_update",
            "promote_ms_per_session",
            "faithful_facts",
        } <= set(rows)
        top5 = rows["answer_session_top5"]
        assert top5["goal"] == report["arms"]["raw"]["by_group"]["all"]["any@5"]
        assert top5["value"] == report["arms"][arm]["by_group"]["all"]["any@5"]
        assert rows["storage_vs_raw"]["goal"] == 1.5 and rows["storage_vs_raw"]["value"] > 0
        assert rows["promote_ms_per_session"]["goal"] == 50.0
        assert rows["promote_ms_per_session"]["met"] is not None
        assert rows["knowledge_update"]["value"] is None  # no update questions in this run
        assert rows["faithful_facts"]["met"] is None  # judged by hand on the fact sample
    # the evidence turn holds a duration: the old rules had none, the new ones keep it
    assert targets["old"]["fact_from_evidence:single-session-user"]["met"] is False
    assert targets["new"]["fact_from_evidence:single-session-user"]["met"] is True


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


def test_issue24_judged_facts_of_1_5_rates_with_intervals() -> None:
    """The labels of extractor 1.5 (new seeds, each drawn after the rules it measures were
    committed: r5, then r6 after the fixes r5 showed) and the 95 % Wilson intervals
    `fact_sample --rates` prints beside each share."""
    from quipu.evals.fact_sample import rates, wilson

    got = rates(Path(__file__).parents[1] / "data" / "promotion_judged_facts_r5.json")
    assert got["judged"] == 160 and got["version"] == "1.5"
    assert got["faithful_durable"]["share"] == 0.731
    assert got["faithful_durable"]["ci95"] == (0.658, 0.794)
    assert got["distorted_or_wrongly_stored"] == 0.075
    assert got["distorted_or_wrongly_stored_ci95"] == (0.043, 0.127)
    assert wilson(0, 10) == (0.0, 0.278) and wilson(5, 0) == (0.0, 1.0)
    after = rates(Path(__file__).parents[1] / "data" / "promotion_judged_facts_r6.json")
    assert after["judged"] == 160 and after["faithful_durable"]["share"] == 0.762
    assert after["distorted_or_wrongly_stored"] == 0.044
