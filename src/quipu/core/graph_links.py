"""The part of the entity graph one recall reads for its multi-hop signal (issue 26). Pure.

:class:`GraphLinks` is the bipartite neighbourhood of a recall's first hits in the
entity-memory graph, as a store returns it (``Store.graph_links``); the signal computed from it
is :mod:`quipu.retrieval.graph_signal`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GraphLinks:
    """Entity nodes and the memory rows naming them, around a recall's seed rows.

    A node is an entity's folded name: the entities of one name in a scope are one node,
    whatever types resolution gave them (the extractor may type "Falcon" a person in one
    sentence and an organisation in the next; for recall both name the same thing).

    ``row_nodes``: the nodes each seed row names (rows naming none are left out).
    ``query_nodes``: the nodes whose name or alias the query holds.
    ``mentions``: how many memories of the scope name each of those nodes.
    ``node_rows``: the current active rows naming each node, only for nodes named by at most
    the ``fanout`` the store was asked for (a hub's rows are not read)."""

    row_nodes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    query_nodes: tuple[str, ...] = ()
    mentions: dict[str, int] = field(default_factory=dict)
    node_rows: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        row_nodes: Mapping[int, Iterable[str]],
        query_nodes: Iterable[str],
        mentions: Mapping[str, int],
        node_rows: Mapping[str, Iterable[int]],
    ) -> GraphLinks:
        """Sorted tuples from what a store's reads collected."""
        return cls(
            {key: tuple(sorted(nodes)) for key, nodes in row_nodes.items()},
            tuple(query_nodes),
            dict(mentions),
            {node: tuple(sorted(rows)) for node, rows in node_rows.items()},
        )
