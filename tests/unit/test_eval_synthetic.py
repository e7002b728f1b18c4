"""The synthetic retrieval eval: corpus generator (EVAL-1), scorer and runner (EVAL-2)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quipu.embeddings.local import LocalEmbedder
from quipu.evals import synthetic
from quipu.evals.datasets import DatasetFormatError
from quipu.evals.retrieval_eval import (
    graded_ndcg_at_k,
    run_retrieval_eval,
    score_query,
    score_rankings,
    violates_order,
)
from quipu.evals.synthetic import Judgement
from quipu.retrieval.terms import STOPWORDS
from quipu.surfaces.cli.app import app

runner = CliRunner()
FILES = (synthetic.CORPUS_FILE, synthetic.QUERIES_FILE, synthetic.QRELS_FILE)


@pytest.fixture(scope="module")
def corpus() -> synthetic.SyntheticCorpus:
    return synthetic.generate(42)


def _turn_texts(corpus: synthetic.SyntheticCorpus) -> dict[str, str]:
    return {t.turn_id: t.indexed_text for c in corpus.conversations for _, t in c.turns()}


def _answers(judgement: Judgement) -> list[str]:
    return [turn for turn, grade in judgement.relevant.items() if grade == 3]


# --------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------


def test_eval_001_same_seed_writes_identical_bytes_and_another_seed_differs(
    tmp_path: Path,
) -> None:
    first = synthetic.write_corpus(synthetic.generate(42), tmp_path / "a")
    second = synthetic.write_corpus(synthetic.generate(42), tmp_path / "b")
    other = synthetic.write_corpus(synthetic.generate(43), tmp_path / "c")
    assert [p.name for p in first] == list(FILES)
    for a, b, c in zip(first, second, other, strict=True):
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes() != c.read_bytes()
        assert a.read_bytes().endswith(b"}\n")


def test_eval_001_output_does_not_depend_on_hash_randomisation(tmp_path: Path) -> None:
    synthetic.write_corpus(synthetic.generate(42, 3), tmp_path / "here")
    script = (
        "import sys; from quipu.evals import synthetic; "
        "synthetic.write_corpus(synthetic.generate(42, 3), sys.argv[1])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "there")], check=True, env=env)
    for name in FILES:
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes()


def test_eval_001_default_size_and_every_tier(corpus: synthetic.SyntheticCorpus) -> None:
    turns = sum(len(c.turns()) for c in corpus.conversations)
    assert len(corpus.conversations) == synthetic.DEFAULT_CONVERSATIONS
    assert 500 <= turns <= 5000
    assert all(len(c.sessions) >= 7 for c in corpus.conversations)
    counts = corpus.tier_counts()
    assert list(counts) == list(synthetic.TIERS)
    assert all(count > 0 for count in counts.values())
    ids = [t.turn_id for c in corpus.conversations for _, t in c.turns()]
    assert len(ids) == len(set(ids))


def test_eval_001_adversarial_queries_share_under_30_percent_content_words(
    corpus: synthetic.SyntheticCorpus,
) -> None:
    def plain_words(text: str) -> set[str]:  # an independent reading of the definition
        return {w for w in re.findall(r"[a-zà-ÿ]+", text.lower()) if w not in STOPWORDS}

    texts = _turn_texts(corpus)
    queries = {q.query_id: q for q in corpus.queries}
    adversarial = [j for j in corpus.judgements if j.tier == "adversarial_paraphrase"]
    assert len(adversarial) >= 50
    for judgement in adversarial:
        query = queries[judgement.query_id].text
        (target,) = _answers(judgement)
        assert synthetic.content_overlap(query, texts[target]) < 0.30, query
        asked = plain_words(query)
        assert asked and len(asked & plain_words(texts[target])) / len(asked) < 0.30, query


def test_eval_001_content_overlap_is_the_share_of_query_words() -> None:
    assert synthetic.content_words("The cat's naps, and naps!") == {"cat", "naps"}
    assert synthetic.content_overlap("cat naps daily", "a cat who naps") == pytest.approx(2 / 3)
    assert synthetic.content_overlap("the and of", "anything") == 1.0


def test_eval_001_every_query_is_judged_against_turns_of_its_conversation(
    corpus: synthetic.SyntheticCorpus,
) -> None:
    judgements = {j.query_id: j for j in corpus.judgements}
    assert [q.query_id for q in corpus.queries] == [j.query_id for j in corpus.judgements]
    turn_owner = {t.turn_id: c.conversation_id for c in corpus.conversations for _, t in c.turns()}
    for query in corpus.queries:
        judgement = judgements[query.query_id]
        assert judgement.relevant and _answers(judgement)
        assert set(judgement.relevant.values()) <= {1, 2, 3}
        for turn_id in (*judgement.relevant, *judgement.must_not_rank_above):
            assert turn_owner[turn_id] == query.conversation_id
        assert not set(judgement.relevant) & set(judgement.must_not_rank_above)
        if judgement.tier != "implicit_preference":  # those ask "window or aisle?"
            assert judgement.answer.lower() not in query.text.lower()
    for tier in ("supersession", "contradiction", "stale", "injection"):
        assert all(j.must_not_rank_above for j in corpus.judgements if j.tier == tier)


def test_eval_001_queries_file_holds_no_relevance_information(tmp_path: Path) -> None:
    synthetic.write_corpus(synthetic.generate(42), tmp_path)
    raw = (tmp_path / synthetic.QUERIES_FILE).read_text()
    rows = json.loads(raw)["queries"]
    assert rows
    for row in rows:
        assert set(row) <= {"query_id", "conversation_id", "text", "as_of"}
    assert not re.search(r"-s\d\d-t\d\d", raw)  # no turn id
    for word in ("tier", "relevant", "must_not", "answer", *synthetic.TIERS):
        assert f'"{word}"' not in raw
    loaded = synthetic.load_qrels(tmp_path)
    assert set(loaded) == {row["query_id"] for row in rows}


def test_eval_001_supersession_is_asked_now_and_as_of_before_the_change(
    corpus: synthetic.SyntheticCorpus,
) -> None:
    times = {t.turn_id: t.observed_at for c in corpus.conversations for _, t in c.turns()}
    queries = {q.query_id: q for q in corpus.queries}
    pairs: dict[tuple[str, str], list[Judgement]] = defaultdict(list)
    for judgement in corpus.judgements:
        if judgement.tier == "supersession":
            query = queries[judgement.query_id]
            pairs[(query.conversation_id, query.text)].append(judgement)
    assert pairs
    for pair in pairs.values():
        by_variant = {j.variant: j for j in pair}
        assert sorted(by_variant) == ["as_of", "current"]
        current, past = by_variant["current"], by_variant["as_of"]
        assert queries[current.query_id].as_of is None
        as_of = queries[past.query_id].as_of
        assert as_of is not None
        (new,) = _answers(current)
        (old,) = _answers(past)
        assert current.must_not_rank_above == (old,) and past.must_not_rank_above == (new,)
        assert times[old] < as_of < times[new]


def test_eval_001_loaders_round_trip_and_refuse_other_files(tmp_path: Path) -> None:
    corpus = synthetic.generate(7, 2)
    synthetic.write_corpus(corpus, tmp_path)
    assert synthetic.load_conversations(tmp_path) == list(corpus.conversations)
    assert synthetic.load_queries(tmp_path) == list(corpus.queries)
    assert list(synthetic.load_qrels(tmp_path).values()) == list(corpus.judgements)
    assert synthetic.corpus_seed(tmp_path) == 7
    (tmp_path / synthetic.QRELS_FILE).write_text('{"format": "other"}\n')
    with pytest.raises(DatasetFormatError):
        synthetic.load_qrels(tmp_path)
    with pytest.raises(ValueError):
        synthetic.generate(1, 0)


# --------------------------------------------------------------------------------------
# Metrics (hand-computed)
# --------------------------------------------------------------------------------------

GRADES = {"a": 3, "b": 2, "z": 1}
RANKED = ["a", "x", "b", "y", "c"]


def _judgement(tier: str = "exact", variant: str = "", must_not: tuple[str, ...] = ()) -> Judgement:
    return Judgement("q1", "c001", tier, variant, GRADES, must_not, "answer")


def test_eval_002_precision_recall_mrr_at_k() -> None:
    score = score_query(RANKED, _judgement(), 5)
    assert score.precision == pytest.approx(2 / 5)  # a and b among 5
    assert score.recall == pytest.approx(2 / 3)  # z missing
    assert score.reciprocal_rank == 1.0
    assert score.top1 == 1.0
    late = score_query(["x", "y", "z", "a"], _judgement(), 3)
    assert late.precision == pytest.approx(1 / 3)
    assert late.recall == pytest.approx(1 / 3)
    assert late.reciprocal_rank == pytest.approx(1 / 3)  # z (grade 1) at rank 3
    assert late.top1 == 0.0  # a (the answer) is beyond k
    assert score_query(["b", "a"], _judgement(), 2).top1 == 0.0  # grade 2 is not the answer


def test_eval_002_graded_ndcg() -> None:
    # DCG = (2^3-1)/log2(2) + (2^2-1)/log2(4) = 7 + 1.5;
    # ideal = 7/log2(2) + 3/log2(3) + 1/log2(4) = 7 + 1.8928 + 0.5.
    expected = (7 + 3 / 2) / (7 + 3 / math.log2(3) + 1 / 2)
    assert graded_ndcg_at_k(RANKED, GRADES, 5) == pytest.approx(expected)
    assert graded_ndcg_at_k(RANKED, GRADES, 5) == pytest.approx(0.90495, abs=1e-5)
    assert graded_ndcg_at_k(["a", "b", "z"], GRADES, 3) == pytest.approx(1.0)
    # k = 1 with the answer second: nothing gained, ideal is the answer alone.
    assert graded_ndcg_at_k(["b", "a"], GRADES, 1) == pytest.approx(3 / 7)
    assert graded_ndcg_at_k(["a", "a", "a"], {"a": 3}, 3) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        graded_ndcg_at_k(RANKED, GRADES, 0)
    with pytest.raises(ValueError):
        graded_ndcg_at_k(RANKED, {"a": 0}, 5)


def test_eval_002_order_violations() -> None:
    assert violates_order(["old", "new"], {"new"}, {"old"}, 5)
    assert not violates_order(["new", "old"], {"new"}, {"old"}, 5)
    assert violates_order(["x", "old"], {"new"}, {"old"}, 5)  # the answer is missing
    assert not violates_order(["x", "y", "old"], {"new"}, {"old"}, 2)  # beyond k
    assert not violates_order([], {"new"}, {"old"}, 5)
    assert score_query(["b", "a"], _judgement(), 2).violation is None  # nothing forbidden
    assert score_query(["m", "a"], _judgement(must_not=("m",)), 2).violation is True


def test_eval_002_scores_group_by_tier_and_variant() -> None:
    qrels = {
        "q1": Judgement("q1", "c1", "supersession", "current", {"new": 3}, ("old",), "B"),
        "q2": Judgement("q2", "c1", "supersession", "as_of", {"old": 3}, ("new",), "A"),
        "q3": Judgement("q3", "c1", "exact", "", {"t": 3, "e": 1}, (), "T"),
    }
    rankings = {"q1": ["old", "new"], "q2": ["old"], "q3": ["t", "x", "e"]}
    overall, tiers, variants, scores = score_rankings(rankings, qrels, 3)
    assert list(tiers) == ["exact", "supersession"]  # TIERS order
    assert list(variants) == ["supersession/as_of", "supersession/current"]
    assert tiers["supersession"].violation_rate == 0.5
    assert tiers["supersession"].top1 == 0.5
    assert tiers["exact"].violation_rate is None and tiers["exact"].violation_queries == 0
    assert variants["supersession/current"].mrr == 0.5
    assert overall.count == 3 and overall.violation_queries == 2
    assert overall.top1 == pytest.approx(2 / 3)
    assert [s.query_id for s in scores] == ["q1", "q2", "q3"]
    with pytest.raises(ValueError, match="differ"):
        score_rankings({"q1": []}, qrels, 3)


# --------------------------------------------------------------------------------------
# End to end, through the library and the CLI, with the bundled embedder
# --------------------------------------------------------------------------------------


class _RestoreQrelsAfterSearch:
    """Progress that puts qrels.json back only once every query has been searched: a run
    that read the judgements any earlier would fail."""

    def __init__(self, hidden: Path, home: Path) -> None:
        self.hidden, self.home = hidden, home
        self.total = self.done = 0

    def start(self, stage: str, total: int) -> None:
        if stage == "recall":
            self.total = total

    def advance(self, stage: str, amount: int) -> None:
        if stage == "recall":
            self.done += amount
            if self.done == self.total:
                shutil.move(self.hidden, self.home)


def test_eval_002_judgements_are_read_only_after_every_search(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    data = tmp_path / "data"
    synthetic.write_corpus(synthetic.generate(5, 1), data)
    hidden = tmp_path / "sealed.json"
    shutil.move(data / synthetic.QRELS_FILE, hidden)
    progress = _RestoreQrelsAfterSearch(hidden, data / synthetic.QRELS_FILE)
    report = run_retrieval_eval(
        data, tmp_path / "e.db", k=5, embedder=local_embedder, progress=progress, details=True
    )
    assert progress.done == report.queries == len(report.per_query)
    assert report.turns == report.ingest.turns > 50
    assert report.ingest.quarantined >= 0 and not report.ingest.refused
    assert all(len(q.ranked) <= 5 for q in report.per_query)
    with pytest.raises(FileExistsError):
        run_retrieval_eval(data, tmp_path / "e.db", embedder=local_embedder)


def test_eval_002_cli_generates_and_scores_a_small_corpus(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "report.json"
    result = runner.invoke(
        app, ["eval", "generate", "--seed", "42", "--out", str(data), "--conversations", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "adversarial_paraphrase" in result.output
    assert sorted(p.name for p in data.iterdir()) == sorted(FILES)

    args = ["eval", "retrieval", "--data", str(data), "--k", "5", "--json", str(out)]
    result = runner.invoke(app, [*args, "--db", str(tmp_path / "eval.db")])
    assert result.exit_code == 0, result.output
    assert "nDCG@5" in result.output and "overall" in result.output
    report = json.loads(out.read_text())
    assert report["k"] == 5 and report["seed"] == 42 and report["conversations"] == 2
    assert list(report["tiers"]) == list(synthetic.TIERS)
    assert sum(t["count"] for t in report["tiers"].values()) == report["queries"]
    assert report["tiers"]["exact"]["top1"] >= 0.8
    assert report["tiers"]["exact"]["mrr"] >= report["tiers"]["adversarial_paraphrase"]["mrr"]
    # Before the change the new value is not yet valid: as_of can never rank it first.
    assert report["variants"]["supersession/as_of"]["violation_rate"] == 0.0
    for score in report["tiers"].values():  # at most 2 relevant turns a query: P@5 <= R@5
        assert 0.0 <= score["precision"] <= score["recall"] <= 1.0

    result = runner.invoke(app, [*args, "--db", str(tmp_path / "eval.db")])
    assert result.exit_code == 2  # the store is not fresh any more

    # settings can be changed for an experiment, and the report says which were used
    assert report["settings"]["query_expansion"] == 0.0
    changed = [*args, "--set", "query_expansion=0.3", "--db", str(tmp_path / "e2.db")]
    result = runner.invoke(app, changed)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["settings"]["query_expansion"] == 0.3
    result = runner.invoke(app, [*args, "--set", "query_expansion=2"])
    assert result.exit_code == 2 and "query_expansion" in result.output
