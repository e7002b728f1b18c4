"""The public-benchmark harnesses end to end on tiny inline files (EVAL-3).

Each file is small enough to check by hand: two LoCoMo sessions, three LongMemEval sessions.
With two sessions in a haystack, a question whose evidence spans both has ``all@1 = 0`` and
``all@3 = 1`` whatever the ranking, and ``any@1 = 1``; the single-evidence questions are worded
so that every system puts the evidence turn first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quipu.embeddings.local import LocalEmbedder
from quipu.evals.public_bench import (
    locomo_haystacks,
    longmemeval_haystacks,
    make_systems,
    run_benchmark,
)
from quipu.evals.tokens import count_tokens
from quipu.surfaces.cli.app import app

LOCOMO = [
    {
        "sample_id": "conv-t1",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a golden retriever."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "What is the puppy called?"},
                {"speaker": "Alice", "dia_id": "D1:3", "text": "His name is Biscuit."},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "I started cello lessons."},
                {
                    "speaker": "Alice",
                    "dia_id": "D2:2",
                    "text": "Biscuit chewed my sandals again.",
                    "blip_caption": "a dog on a rug",
                },
            ],
        },
        "qa": [
            {
                "question": "Who started cello lessons?",
                "answer": "Bob",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "What did Biscuit chew?",
                "answer": "sandals",
                "evidence": ["D1:3", "D2:2"],
                "category": 1,
            },
            {
                "question": "Is Bob a spy?",
                "adversarial_answer": "yes",
                "evidence": [],
                "category": 5,
            },
        ],
    }
]


def _lme_question(question_id: str, answer_role: str) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "question_type": "single-session-user",
        "question": "Which city did I move to for my new job?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": "Lisbon",
        "answer_session_ids": ["answer_1"],
        "haystack_session_ids": ["noise_1", "answer_1", "noise_2"],
        "haystack_dates": [
            "2023/05/01 (Mon) 09:00",
            "2023/05/10 (Wed) 18:30",
            "2023/05/20 (Sat) 12:00",
        ],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Give me a recipe for pancakes."},
                {"role": "assistant", "content": "Mix flour, eggs and milk."},
            ],
            [
                {"role": "user", "content": "Hi there."},
                {"role": "assistant", "content": "Hello! How can I help?"},
                {
                    "role": "user",
                    "content": "I moved to Lisbon for my new job last week.",
                    "has_answer": answer_role == "user",
                },
                {
                    "role": "assistant",
                    "content": "Congratulations on the move to Lisbon!",
                    "has_answer": answer_role == "assistant",
                },
            ],
            [{"role": "user", "content": "How do I fix a flat bicycle tyre?"}],
        ],
    }


LONGMEMEVAL = [
    _lme_question("q_user", "user"),
    _lme_question("q_user_abs", "user"),  # abstention: skipped
    _lme_question("q_assistant", "assistant"),  # no user evidence turn: skipped
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    return path


@pytest.fixture
def longmemeval_file(tmp_path: Path) -> Path:
    path = tmp_path / "longmemeval.json"
    path.write_text(json.dumps(LONGMEMEVAL), encoding="utf-8")
    return path


def test_locomo_haystacks_follow_the_protocol(locomo_file: Path) -> None:
    [haystack] = locomo_haystacks(locomo_file)
    assert haystack.haystack_id == "conv-t1"
    assert [t.text for t in haystack.turns][-1] == (
        "Alice: Biscuit chewed my sandals again. [image: a dog on a rug]"
    )
    assert [q.question_id for q in haystack.queries] == ["conv-t1/1", "conv-t1/2"]
    multi = haystack.queries[1]
    assert multi.category == "1 multi-hop"
    assert multi.gold_sessions == {"session_1", "session_2"}
    assert multi.gold_turns == {"D1:3", "D2:2"}
    assert [len(h.queries) for h in locomo_haystacks(locomo_file, limit=1)] == [1]


def test_longmemeval_haystacks_index_user_turns_and_skip_unscored(
    longmemeval_file: Path,
) -> None:
    [haystack] = longmemeval_haystacks(longmemeval_file)
    assert haystack.haystack_id == "q_user"
    assert [t.turn_id for t in haystack.turns] == [
        "noise_1_1",
        "answer_1_1",
        "answer_1_3",
        "noise_2_1",
    ]
    [query] = haystack.queries
    assert query.gold_sessions == {"answer_1"}
    assert query.gold_turns == {"answer_1_3"}


def test_locomo_end_to_end(
    locomo_file: Path, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    systems = make_systems(local_embedder, tmp_path).chosen(baselines=True)
    report = run_benchmark(locomo_haystacks(locomo_file), systems, depth=10, details=True)

    assert (report["haystacks"], report["turns"], report["questions"]) == (1, 5, 2)
    assert (report["depth"], report["latency_k"]) == (10, 10)
    assert set(report["systems"]) == {"quipu", "bm25", "dense", "hybrid"}
    for name, body in report["systems"].items():
        overall = body["overall"]
        assert overall["count"] == 2
        assert set(overall["session"]) == {
            "count",
            *(f"{m}@{k}" for m in ("all", "any") for k in (1, 3, 5, 10)),
            "ndcg@10",
            "mrr",
        }
        single = body["by_category"]["4 single-hop"]
        multi = body["by_category"]["1 multi-hop"]
        # The single-hop evidence turn ranks first for every system.
        assert single["session"]["all@1"] == 1.0, name
        assert single["turn"]["all@1"] == 1.0, name
        assert single["context_tokens"]["@1"] == count_tokens("Bob: I started cello lessons.")
        # Two sessions in all: spanning both is all@1 = 0, all@3 = 1, any@1 = 1.
        assert multi["session"]["all@1"] == 0.0, name
        assert multi["session"]["any@1"] == 1.0, name
        assert multi["session"]["all@3"] == 1.0, name
        assert overall["session"]["all@1"] == 0.5, name
        assert overall["context_tokens"]["@10"] == pytest.approx(
            sum(count_tokens(t.text) for t in locomo_haystacks(locomo_file)[0].turns)
        )
        assert body["recall_latency_ms"]["p95"] >= body["recall_latency_ms"]["p50"] > 0
        assert body["ranking_latency_ms"]["p95"] >= body["ranking_latency_ms"]["p50"] > 0
        assert len(body["per_question"]) == 2
    quipu = report["systems"]["quipu"]
    assert (quipu["turns"], quipu["memories"], quipu["duplicates"]) == (5, 5, 0)
    assert quipu["settings"]["rrf_k"] > 0
    assert list(tmp_path.glob("*.db")) == []  # each store is deleted after use


def test_longmemeval_end_to_end(
    longmemeval_file: Path, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    systems = make_systems(local_embedder, tmp_path).chosen(baselines=True)
    report = run_benchmark(longmemeval_haystacks(longmemeval_file), systems, depth=10)

    assert (report["haystacks"], report["turns"], report["questions"]) == (1, 4, 1)
    for name, body in report["systems"].items():
        group = body["by_category"]["single-session-user"]
        assert group["session"]["all@1"] == 1.0, name
        assert group["turn"]["all@1"] == 1.0, name
        assert group["turn"]["ndcg@10"] == 1.0, name
        assert group["context_tokens"]["@1"] == count_tokens(
            "I moved to Lisbon for my new job last week."
        )


def test_cli_writes_json_and_prints_tables(locomo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app,
        ["bench", "locomo", "--data", str(locomo_file), "--out", str(out), "--set", "rrf_k=30"],
    )
    assert result.exit_code == 0, result.output
    assert "single-hop" in result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["benchmark"] == "locomo"
    assert report["systems"]["quipu"]["settings"]["rrf_k"] == 30
    assert set(report["systems"]) == {"quipu"}


def test_cli_rejects_a_bad_override(locomo_file: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "locomo", "--data", str(locomo_file), "--set", "no_such_setting=1"]
    )
    assert result.exit_code == 2


def test_cli_compares_two_runs_question_by_question(locomo_file: Path, tmp_path: Path) -> None:
    runs = []
    for name, settings in (("a", []), ("b", ["--set", "fusion=rrf"]), ("plain", [])):
        out = tmp_path / f"{name}.json"
        details = [] if name == "plain" else ["--details"]
        args = ["bench", "locomo", "--data", str(locomo_file), "--out", str(out)]
        result = CliRunner().invoke(app, [*args, *details, *settings])
        assert result.exit_code == 0, result.output
        runs.append(out)
    report = tmp_path / "compare.json"
    result = CliRunner().invoke(
        app, ["bench", "compare", str(runs[0]), str(runs[1]), "--out", str(report)]
    )
    assert result.exit_code == 0, result.output
    assert "session all@5" in result.output and "sign test" in result.output
    metrics = {m["metric"]: m for m in json.loads(report.read_text())["metrics"]}
    assert set(metrics) >= {"session all@5", "session all@10", "turn all@5", "turn any@10"}
    for m in metrics.values():  # the means differ by exactly the questions won and lost
        assert (m["after"] - m["before"]) * 2 == pytest.approx(len(m["won"]) - len(m["lost"]))
    # a run without --details, or an unknown system, is a clear error, not a traceback
    result = CliRunner().invoke(app, ["bench", "compare", str(runs[0]), str(runs[2])])
    assert result.exit_code == 2 and "--details" in result.output
    result = CliRunner().invoke(
        app, ["bench", "compare", str(runs[0]), str(runs[1]), "--system", "bm25"]
    )
    said = " ".join(result.output.split())  # the error wraps at the terminal width, where
    # the temporary folder's path (pytest-99, pytest-1228) falls decides the break
    assert result.exit_code == 2 and "no system 'bm25'" in said, result.output
