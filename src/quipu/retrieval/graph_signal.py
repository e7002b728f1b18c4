"""Multi-hop recall through the entity graph (issue 26, setting ``graph_weight``). Pure.

The graph is bipartite: memories on one side, the entities they name on the other (written at
write time by :mod:`quipu.graph.extract`, no model call). A recall's first ranking says which
memories are probably relevant; the question is which *other* memories are about the same
things. The signal answers it the way personalised PageRank does on that graph (HippoRAG's
idea, without its LLM), cut to the two steps that reach a memory from a seed:

1. **Seeds.** The first :data:`SEED_ROWS` rows of the fused ranking, each weighted by its fused
   score over the top score, and the entities the query names, together weighted like one top
   row.
2. **Memory -> entity.** Each seed row spreads its weight evenly over the entities it names.
   An entity named by more than ``graph_share`` of the scope's memories (a hub: the user, a
   speaker in every turn) takes no part: a walk through it reaches everything, so it says
   nothing about any one memory.
3. **Entity -> memory.** Each entity passes its weight evenly to the memories naming it (so a
   rare entity passes more to each), except what a row put in itself: a memory gains only
   from *other* seeds and the query.

The row's score over the best row's score, times ``graph_weight``, is added to its fused score
before the session aggregate; a row the first pass did not find enters the candidates (its
cosine to the query read like any candidate's). Measured in docs/benchmarks.md ("Multi-hop
through the entity graph"); explained in docs/graph.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from quipu.core.graph import folded_name
from quipu.core.graph_links import GraphLinks
from quipu.core.records import ScopeRef
from quipu.graph.query import query_names

#: Rows of the first ranking that seed the walk.
SEED_ROWS = 10
#: Rows the signal may add to the candidates, best first.
NEW_ROWS = 50
#: Scores over the best row's (True) or as the weight reaching the row, at most 1 (False).
RELATIVE = True


def query_keys(text: str) -> list[str]:
    """The folded names the query may mention (:func:`quipu.graph.query.query_names`)."""
    return list(dict.fromkeys(k for k in (folded_name(n) for n in query_names(text)) if k))


#: The most memories an entity may be named by and still pass weight, whatever the share: each
#: of them would get under 1/200 of what the entity carries, and reading them made the signal
#: 3.4x the recall's p95 at a 100k-memory scope (docs/benchmarks.md).
MAX_FANOUT = 200


def fanout(rows: int, share: float) -> int:
    """The most memories an entity may be named by and still pass weight (2..MAX_FANOUT)."""
    return min(MAX_FANOUT, max(2, int(rows * share)))


def seed_weights(fused: Sequence[tuple[int, float, tuple[str, ...]]]) -> dict[int, float]:
    """The first :data:`SEED_ROWS` rows, each weighted by its score over the top score."""
    top = fused[:SEED_ROWS]
    best = max((score for _, score, _ in top), default=0.0)
    if best <= 0:
        return {key: 1.0 for key, _, _ in top}
    return {key: max(score, 0.0) / best for key, score, _ in top}


def spread(links: GraphLinks, seeds: dict[int, float]) -> dict[int, float]:
    """Each row's share of the weight the seeds and the query's entities spread through the
    entities they name, over the best row's share (0..1]; rows reached by nothing are absent.
    Only entities with rows in ``links.node_rows`` (not hubs) carry weight."""
    given: dict[tuple[int, str], float] = {}  # what each seed row put into each entity
    mass: dict[str, float] = {}
    for key, weight in seeds.items():
        named = [e for e in links.row_nodes.get(key, ()) if len(links.node_rows.get(e, ())) > 1]
        for entity in named:
            part = weight / len(named)
            given[(key, entity)] = part
            mass[entity] = mass.get(entity, 0.0) + part
    asked = [e for e in links.query_nodes if links.node_rows.get(e)]
    for entity in asked:
        mass[entity] = mass.get(entity, 0.0) + 1.0 / len(asked)
    score: dict[int, float] = {}
    for entity, total in mass.items():
        rows = links.node_rows[entity]
        for key in rows:
            own = given.get((key, entity), 0.0)
            others = len(rows) - 1 if own else len(rows)
            if total - own > 0 and others > 0:
                score[key] = score.get(key, 0.0) + (total - own) / len(rows)
    if not RELATIVE:
        return {key: min(1.0, value) for key, value in score.items() if value > 0}
    best = max(score.values(), default=0.0)
    if best <= 0:
        return {}
    return {key: value / best for key, value in score.items()}


def boosts(scores: dict[int, float], weight: float) -> dict[int, float]:
    """``weight`` times each row's share: what the fused score of a row gains."""
    return {key: weight * value for key, value in scores.items() if value > 0}


def new_rows(scores: dict[int, float], known: set[int]) -> list[int]:
    """The best :data:`NEW_ROWS` rows the signal reached that the first pass did not find."""
    fresh = sorted(
        ((key, value) for key, value in scores.items() if key not in known),
        key=lambda item: (-item[1], item[0]),
    )
    return [key for key, _ in fresh[:NEW_ROWS]]


def apply(
    fused: Sequence[tuple[int, float, tuple[str, ...]]],
    gains: dict[int, float],
    label: str = "graph",
) -> list[tuple[int, float, tuple[str, ...]]]:
    """``fused`` with each row's gain added (labelled ``label``), best first, ties on key."""
    out = [
        (key, score + gains[key], (*found, label)) if gains.get(key) else (key, score, found)
        for key, score, found in fused
    ]
    return sorted(out, key=lambda item: (-item[1], item[0]))


@runtime_checkable
class GraphPort(Protocol):
    """What the signal reads from a store (:meth:`quipu.storage.base.Store.graph_links`)."""

    def graph_links(
        self, ref: ScopeRef, keys: Sequence[int], names: Sequence[str], fanout: int
    ) -> GraphLinks: ...
