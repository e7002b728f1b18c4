"""The topic-link signal's arithmetic (issue 26, ``topic_weight``): pure, no store."""

from __future__ import annotations

import pytest

from quipu.retrieval import topic_signal


def test_issue26_topic_words_are_the_distinctive_words_the_seeds_share_not_the_query_s() -> None:
    """A seed spreads its weight over its words held by 2..share of the scope, leaving out the
    query's own words (BM25 scores those already), hubs and words no other memory holds."""
    words = topic_signal.seed_words(
        {
            1: "Melanie: I finished a pottery bowl at the studio",
            2: "Melanie: the pottery class meets on Friday",
        }
    )
    assert words[1]["potteri"] == "pottery"
    frequencies = {"melani": 300, "potteri": 4, "bowl": 1, "studio": 2, "class": 3, "friday": 9}
    chosen = topic_signal.topic(
        {1: 1.0, 2: 0.5}, words, "What did Melanie make at the studio?", 600, frequencies, 0.01
    )
    # pottery is reached from both seeds; studio is the query's own word; bowl links nothing;
    # melanie is a hub; friday is over 1 % of 600 memories (6)
    assert chosen.words == ("pottery", "class")
    assert chosen.mass == {"pottery": 1.25, "class": 0.25}
    assert topic_signal.limit(600, 0.01) == 6 and topic_signal.limit(10, 0.01) == 2
    assert topic_signal.limit(100_000, 0.01) == topic_signal.MAX_ROWS == 200


def test_issue26_a_word_passes_its_weight_evenly_to_its_holders_but_not_back_to_its_giver() -> None:
    walk = topic_signal.Topic(
        ("pottery", "class"), {"pottery": 1.25, "class": 0.25}, {(1, "pottery"): 1.0}
    )
    # row 1 gave pottery 1.0 of its 1.25: it gets 0.25 / 2 back; row 7 gets 1.25 / 2 + 0.25 / 1
    scores = topic_signal.spread(walk, {"pottery": [1, 7], "class": [7]})
    assert scores == {7: 1.0, 1: pytest.approx(1 / 7)}
    assert topic_signal.gains(scores, 0.2) == {7: 0.2, 1: pytest.approx(0.2 / 7)}
    assert topic_signal.new_rows(scores, known={1}) == [7]
    assert topic_signal.new_rows(scores, known={1, 7}) == []
    assert topic_signal.spread(topic_signal.Topic(), {}) == {}
