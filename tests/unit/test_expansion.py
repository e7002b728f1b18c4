"""Query expansion keys (docs/benchmarks.md, sixth round): the shipped word table and how a
query's BM25 keys are weighted."""

from __future__ import annotations

import gzip
import importlib.resources

import numpy as np
import pytest

from quipu.retrieval import expansion
from quipu.retrieval.bm25 import Postings, query_tokens, tokenize
from quipu.retrieval.expansion import FLOOR, PER_WORD, neighbours, query_keys


def test_the_table_ships_with_the_package_and_lists_nearest_words_best_first() -> None:
    raw = importlib.resources.files("quipu.retrieval") / "data" / "neighbours.tsv.gz"
    lines = gzip.decompress(raw.read_bytes()).decode().splitlines()
    table = neighbours()
    assert len(table) == len(lines) > 10_000
    for word, pairs in table.items():
        cosines = [c for _, c in pairs]
        assert cosines == sorted(cosines, reverse=True), word
        assert all(FLOOR <= c <= 1.0 for c in cosines), word
        own = tokenize(word)[0]
        assert own not in {key for key, _ in pairs}, word  # never the word's own stem
    assert "night" in dict(table["evening"])


def test_query_keys_add_the_neighbours_of_each_query_word_at_weight_times_cosine() -> None:
    keys = query_keys("What can I do in the evening?", 0.3)
    cosine = dict(neighbours()["evening"])["night"]
    assert keys["evening"] == 1.0
    assert keys["night"] == pytest.approx(0.3 * cosine)
    added = [k for k in keys if k not in query_tokens("What can I do in the evening?")]
    assert 0 < len(added) <= PER_WORD


def test_query_keys_without_weight_are_the_plain_query_keys() -> None:
    query = "Which cities has John been to in the evening?"
    assert query_keys(query, 0.0) == dict.fromkeys(query_tokens(query), 1.0)


def test_question_form_words_are_not_expanded_and_own_keys_keep_weight_one() -> None:
    # "kinds" is a question-form word: not a key, so its neighbours are not added either
    query = "What kinds of rivers?"
    keys = query_keys(query, 1.0)
    assert query_tokens(query) == ["river"]
    first = [(k, c) for k, c in neighbours()["rivers"] if k != "river"][:PER_WORD]
    assert keys == {"river": 1.0, **dict(first)}


def test_a_weighted_key_scores_its_weight_times_its_bm25() -> None:
    index = Postings()
    index.bulk_add([tokenize("quiet night at home"), tokenize("evening news"), tokenize("x")])
    plain = index.scores(["night"])
    weighted = index.scores({"evening": 1.0, "night": 0.25})
    assert plain is not None and weighted is not None
    evening = index.scores(["evening"])
    assert evening is not None
    np.testing.assert_allclose(weighted, evening + 0.25 * plain, rtol=1e-6)
    assert index.scores({"night": 0.0}) is None  # a zero weight is no key


def test_the_table_is_loaded_once() -> None:
    assert expansion.neighbours() is expansion.neighbours()
