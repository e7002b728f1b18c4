"""The multi-hop signal's arithmetic (issue 26, ``graph_weight``): pure, no store."""

from __future__ import annotations

from quipu.core.graph_links import GraphLinks
from quipu.retrieval import graph_signal


def test_a_row_gains_only_through_a_shared_entity_not_from_itself_nor_a_hub() -> None:
    links = GraphLinks.of(
        row_nodes={1: ["kestrel", "priya"], 2: ["solo"]},
        query_nodes=["priya"],
        mentions={"kestrel": 2, "priya": 50, "solo": 1},
        # priya is a hub (over the fanout): the store read no rows for it
        node_rows={"kestrel": [1, 3], "solo": [2]},
    )
    scores = graph_signal.spread(links, {1: 1.0, 2: 0.8})
    # row 3 shares kestrel with seed 1; seed 1 gets nothing back from its own weight; the
    # entity only row 2 names links nothing; the hub priya carries no weight
    assert scores == {3: 1.0}
    assert graph_signal.new_rows(scores, known={1, 2}) == [3]
    fused = [(1, 0.9, ("semantic",)), (2, 0.7, ("text",)), (3, 0.1, ("semantic",))]
    lifted = graph_signal.apply(fused, graph_signal.boosts(scores, 0.7))
    assert lifted[1] == (3, 0.1 + 0.7, ("semantic", "graph"))


def test_the_query_entities_seed_the_walk_and_hubs_are_cut_by_share() -> None:
    links = GraphLinks.of({}, ["lisbon"], {"lisbon": 2}, {"lisbon": [7, 8]})
    assert graph_signal.spread(links, {}) == {7: 1.0, 8: 1.0}
    assert graph_signal.fanout(1000, 0.05) == 50 and graph_signal.fanout(10, 0.05) == 2
    # issue 26, 100k scope: an entity of 5,000 memories is a hub whatever the share
    assert graph_signal.fanout(100_000, 0.05) == graph_signal.MAX_FANOUT == 200
    assert graph_signal.query_keys("Where did Anna Smith move?")[:1] == ["anna smith"]
