"""The message-level benchmarks of issue 31 (EVAL-1, EVAL-3): the seeded technical-chat
generator, BEAM's chat format (a tiny folder written here in that format; BEAM itself is never
shipped), the plain-hybrid baseline and the vector cache, and ``quipu bench tech`` end to end
with the real bundled model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from quipu.embeddings.local import LocalEmbedder
from quipu.evals import tech_corpus
from quipu.evals.baselines import BM25Baseline, DenseBaseline, HybridBaseline
from quipu.evals.beam import beam_haystacks, evidence_ids, strip_marker
from quipu.evals.datasets import DatasetFormatError
from quipu.evals.vector_cache import CachedEmbedder
from quipu.surfaces.cli.app import app


@pytest.fixture(scope="module")
def corpus() -> tech_corpus.TechCorpus:
    return tech_corpus.generate(31, 4)


def test_eval3_tech_generator_is_deterministic(
    corpus: tech_corpus.TechCorpus, tmp_path: Path
) -> None:
    first = tech_corpus.write(corpus, tmp_path / "a").read_bytes()
    second = tech_corpus.write(tech_corpus.generate(31, 4), tmp_path / "b").read_bytes()
    assert first == second
    assert tech_corpus.write(tech_corpus.generate(32, 4), tmp_path / "c").read_bytes() != first
    assert tech_corpus.load(tmp_path / "a") == corpus


def test_eval3_tech_questions_name_messages_of_their_chat(corpus: tech_corpus.TechCorpus) -> None:
    ids = {c.chat_id: {m.message_id for s in c.sessions for m in s.messages} for c in corpus.chats}
    split = {c.chat_id: c.split for c in corpus.chats}
    assert [c.split for c in corpus.chats] == ["dev", "test", "dev", "test"]
    for q in corpus.questions:
        assert q.evidence and set(q.evidence) <= ids[q.chat_id], q.question_id
        assert q.split == split[q.chat_id]
        assert q.category in tech_corpus.CATEGORIES
    # every category is asked in every chat
    for chat in corpus.chats:
        asked = {q.category for q in corpus.questions if q.chat_id == chat.chat_id}
        assert asked == set(tech_corpus.CATEGORIES)
    # the error_fix and update questions point at two messages each
    assert all(
        len(q.evidence) == 2 for q in corpus.questions if q.category in ("error_fix", "update")
    )


def test_eval3_tech_haystacks_by_split(corpus: tech_corpus.TechCorpus) -> None:
    dev = tech_corpus.tech_haystacks(corpus, "dev")
    test = tech_corpus.tech_haystacks(corpus, "test")
    assert [h.haystack_id for h in dev] == [corpus.chats[0].chat_id, corpus.chats[2].chat_id]
    assert [h.haystack_id for h in test] == [corpus.chats[1].chat_id, corpus.chats[3].chat_id]
    [first] = tech_corpus.tech_haystacks(corpus, "all", limit=3)
    assert len(first.queries) == 3
    turn_ids = {t.turn_id for t in first.turns}
    sessions = {t.turn_id: t.session for t in first.turns}
    for query in first.queries:
        assert query.gold_turns <= turn_ids
        assert query.gold_sessions == {sessions[t] for t in query.gold_turns}
    with pytest.raises(ValueError):
        tech_corpus.tech_haystacks(corpus, "train")


def test_eval3_tech_load_rejects_bad_files(corpus: tech_corpus.TechCorpus, tmp_path: Path) -> None:
    path = tech_corpus.write(corpus, tmp_path)
    raw = json.loads(path.read_text(encoding="utf-8"))
    bad: list[Any] = [
        "not json {",
        json.dumps({"format": "other", "version": 1}),
        json.dumps({**raw, "chats": [{"chat_id": "x"}]}),
        json.dumps({**raw, "questions": [{**raw["questions"][0], "evidence": [10**9]}]}),
        json.dumps({**raw, "questions": [{**raw["questions"][0], "chat_id": "nowhere"}]}),
        json.dumps({**raw, "chats": "\ud800"}),
    ]
    for number, text in enumerate(bad):
        target = tmp_path / f"bad{number}.json"
        target.write_text(text, encoding="utf-8", errors="surrogatepass")
        with pytest.raises(DatasetFormatError):
            tech_corpus.load(target)
    with pytest.raises(DatasetFormatError):
        tech_corpus.load(tmp_path / "missing")


# -- BEAM's format --------------------------------------------------------------------------


def _beam_chat(folder: Path, batches: list[dict[str, Any]], probing: dict[str, Any]) -> None:
    (folder / "probing_questions").mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(batches), encoding="utf-8")
    (folder / "probing_questions" / "probing_questions.json").write_text(
        json.dumps(probing), encoding="utf-8"
    )


def _message(ident: int, role: str, text: str, anchor: str | None = None) -> dict[str, Any]:
    return {"id": ident, "role": role, "content": text, "time_anchor": anchor}


@pytest.fixture
def beam_dir(tmp_path: Path) -> Path:
    root = tmp_path / "100K"
    batches = [
        {
            "batch_number": 1,
            "time_anchor": None,
            "turns": [
                [
                    _message(0, "user", "I use Flask 2.3 with SQLite. ->-> 1,1", "March-15-2024"),
                    _message(1, "assistant", "Flask 2.3 works well with SQLite."),
                ]
            ],
        },
        {
            "batch_number": 2,
            "time_anchor": "April-02-2024",
            "turns": [
                [
                    _message(2, "user", "I moved the app to PostgreSQL 16. ->-> 2,1"),
                    _message(3, "assistant", "PostgreSQL 16 it is."),
                ]
            ],
        },
    ]
    probing = {
        "knowledge_update": [
            {
                "question": "Which database does the app use?",
                "source_chat_ids": {"original_info": [0], "updated_info": [[2]]},
            }
        ],
        "abstention": [{"question": "What is my dog's name?", "source_chat_ids": []}],
        "information_extraction": [{"question": "Which Flask version?", "source_chat_ids": [0, 1]}],
    }
    _beam_chat(root / "2", batches, probing)
    _beam_chat(root / "10", batches, {"information_extraction": []})
    (root / "topics.json").write_text("{}", encoding="utf-8")
    return root


def test_eval3_beam_reads_batches_and_nested_evidence(beam_dir: Path) -> None:
    [haystack] = beam_haystacks(beam_dir)
    assert haystack.haystack_id == "beam-2"
    assert [t.text for t in haystack.turns][:2] == [
        "I use Flask 2.3 with SQLite.",
        "Flask 2.3 works well with SQLite.",
    ]
    assert [t.session for t in haystack.turns] == ["batch_1"] * 2 + ["batch_2"] * 2
    assert haystack.turns[0].observed_at.isoformat() == "2024-03-15T00:00:00+00:00"
    assert haystack.turns[2].observed_at.isoformat() == "2024-04-02T00:00:00+00:00"
    update, extraction = haystack.queries  # the abstention question has no evidence
    assert update.gold_turns == {"0", "2"}
    assert update.gold_sessions == {"batch_1", "batch_2"}
    assert extraction.gold_turns == {"0", "1"}
    assert [len(h.queries) for h in beam_haystacks(beam_dir, limit=1)] == [1]


def test_eval3_beam_evidence_and_markers() -> None:
    assert evidence_ids({"a": [3, [1, 3]], "b": None}, "q") == [3, 1]
    assert strip_marker("text ->-> 3,12") == "text"
    assert strip_marker("a -> b") == "a -> b"
    with pytest.raises(DatasetFormatError):
        evidence_ids([True], "q")
    with pytest.raises(DatasetFormatError):
        evidence_ids(["7"], "q")


def test_eval3_beam_rejects_bad_folders(beam_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError):
        beam_haystacks(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetFormatError):
        beam_haystacks(tmp_path / "empty")
    chat = beam_dir / "2" / "chat.json"
    for text in ('{"x": 1}', "[", '[{"turns": [[{"id": 1, "content": "a"}]]}]'):
        chat.write_text(text, encoding="utf-8")
        with pytest.raises(DatasetFormatError):
            beam_haystacks(beam_dir)


def test_eval3_beam_unknown_evidence_id_is_a_format_error(beam_dir: Path) -> None:
    questions = beam_dir / "2" / "probing_questions" / "probing_questions.json"
    questions.write_text(
        json.dumps({"x": [{"question": "?", "source_chat_ids": [99]}]}), encoding="utf-8"
    )
    with pytest.raises(DatasetFormatError, match="no message with id 99"):
        beam_haystacks(beam_dir)


# -- the plain hybrid and the vector cache -----------------------------------------------------

ITEMS = [
    ("a", "The payment webhook retries three times with exponential backoff."),
    ("b", "We pinned postgres to version 16 in docker compose."),
    ("c", "I had pancakes for breakfast this morning."),
    ("d", "A database image tag is set in the compose file."),
]


def test_eval3_hybrid_is_the_rank_fusion_of_both_baselines(local_embedder: LocalEmbedder) -> None:
    hybrid = HybridBaseline(ITEMS, local_embedder, depth=10)
    bm25 = BM25Baseline(ITEMS).rank("postgres version", 4)
    dense = DenseBaseline(ITEMS, local_embedder).rank("postgres version", 4)
    ranked = hybrid.rank("postgres version", 4)
    assert ranked[0] == "b" == bm25[0] == dense[0]
    assert sorted(ranked) == ["a", "b", "c", "d"]
    # a turn sharing no word with the query still ranks, by its dense rank alone
    assert hybrid.rank("breakfast", 1) == ["c"]
    # a query BM25 knows no word of ranks as the dense baseline alone
    dense_only = DenseBaseline(ITEMS, local_embedder).rank("zzzz qqqq", 4)
    assert hybrid.rank("zzzz qqqq", 4) == dense_only
    assert HybridBaseline([], local_embedder).rank("x", 3) == []
    with pytest.raises(ValueError):
        hybrid.rank("x", -1)
    with pytest.raises(ValueError):
        HybridBaseline(ITEMS, local_embedder, depth=0)


def test_eval3_vector_cache_returns_the_model_vectors(
    local_embedder: LocalEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "vectors"
    cache = CachedEmbedder(local_embedder, path)
    texts = [text for _, text in ITEMS] + ["naïve café 🚀 ünïcode"]
    first = [cache.embed_batch([t]) for t in texts]
    cache.close()
    again = CachedEmbedder(local_embedder, path)
    second = [again.embed_batch([t]) for t in texts]
    assert (again.hits, again.misses) == (len(texts), 0)
    for a, b, text in zip(first, second, texts, strict=True):
        assert np.array_equal(a, b)
        assert np.allclose(a, local_embedder.embed_batch([text]), atol=1e-6)
    assert again.embed_batch(texts[:2]).shape == (2, local_embedder.dimension)
    again.close()


# -- the CLI -----------------------------------------------------------------------------------


def test_eval3_cli_generate_tech_and_bench_it(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["eval", "generate-tech", "--out", str(tmp_path), "--chats", "1", "--seed", "5"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / tech_corpus.FILE).exists()
    out = tmp_path / "tech.json"
    args = ["bench", "tech", "--data", str(tmp_path), "--limit", "4", "--baselines"]
    result = runner.invoke(app, [*args, "--details", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["benchmark"] == "tech (all)"
    assert set(report["systems"]) == {"quipu", "bm25", "dense", "hybrid"}
    assert report["questions"] == 4
    assert report["systems"]["quipu"]["refused"] == {}
    bad = runner.invoke(app, ["bench", "tech", "--split", "train", "--chats", "1"])
    assert bad.exit_code == 2
    missing = runner.invoke(app, ["bench", "tech", "--data", str(tmp_path / "nope")])
    assert missing.exit_code == 2


def test_eval3_cli_beam_reads_a_folder(beam_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "beam.json"
    result = CliRunner().invoke(app, ["bench", "beam", "--data", str(beam_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert (report["turns"], report["questions"]) == (4, 2)
    quipu = report["systems"]["quipu"]["by_category"]["information_extraction"]
    assert quipu["turn"]["all@5"] == 1.0
    cache = ["--vector-cache", str(tmp_path / "vectors")]
    for run in ("first", "second"):
        args = ["bench", "beam", "--data", str(beam_dir), "--details", "--out", str(tmp_path / run)]
        result = CliRunner().invoke(app, [*args, *cache])
        assert result.exit_code == 0, result.output
    first, second = (json.loads((tmp_path / r).read_text()) for r in ("first", "second"))
    assert second["vector_cache"]["hits"] > 0 and second["vector_cache"]["misses"] == 0
    assert [q["ranked_turns"] for q in first["systems"]["quipu"]["per_question"]] == [
        q["ranked_turns"] for q in second["systems"]["quipu"]["per_question"]
    ]
    missing = CliRunner().invoke(app, ["bench", "beam", "--data", str(tmp_path / "nope")])
    assert missing.exit_code == 2
