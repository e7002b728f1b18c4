"""Recall's multi-hop signal through the entity graph on every backend (issue 26, "Multi-hop in
recall"; RECALL-1, GRAPH-1): with ``graph_weight`` on, a memory that shares nothing with the
query but an entity of its best hit is recalled; with it off (the default) it is not."""

from __future__ import annotations

from dataclasses import replace

from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.embeddings.local import LocalEmbedder
from quipu.graph.service import GraphService
from quipu.memories import MemoryService

SEED = "Priya leads the Kestrel team at work."
LINKED = "Kestrel moves its offices to Lisbon in May."
OTHERS = (
    "Priya enjoys old jazz records on Sunday mornings.",
    "Priya went hiking with her brother last weekend.",
    "Priya started learning Spanish in the evenings.",
    "Priya's cat is called Miso and sleeps all day.",
    "Priya is leading a book club about short stories.",
    "Priya cooked a huge pot of lentil soup for friends.",
    "The weather was rainy all week long.",
    "Tom bought a new bicycle for his commute.",
    "The library closes at six on Sundays.",
    "We watched a documentary about deep sea fish.",
)


def test_graph_recall_signal_surfaces_a_memory_linked_only_through_a_shared_entity(
    service: MemoryService, alice: Principal, local_embedder: LocalEmbedder
) -> None:
    """Issue 26: "Kestrel moves its offices to Lisbon" answers where Priya's team is going,
    but holds no word of the question and is far from it in the vector space; it is linked
    to the best hit only by the entity Kestrel. A shallow first pass (``candidate_depth`` 5)
    does not find it at all, so the signal must also bring it into the candidates."""
    service.graph = GraphService(service)
    seed = service.remember(alice, SEED).memory
    linked = service.remember(alice, LINKED).memory
    for text in OTHERS:
        service.remember(alice, text)
    question = "What does Priya lead?"
    shallow = replace(service.limits, candidate_depth=5)

    off = MemoryService(service.store, local_embedder, shallow)
    hits = [h.memory.id for h in off.recall(alice, question, k=3)]
    assert hits[0] == seed.id and linked.id not in hits

    on = MemoryService(service.store, local_embedder, replace(shallow, graph_weight=1.0))
    found = on.recall(alice, question, k=3)
    by_id = {h.memory.id: h for h in found.results}
    assert seed.id in by_id and linked.id in by_id and "graph" in by_id[linked.id].matched
    assert "graph_ms" in found.meta["timings"]

    # Only current active memories are reached: once forgotten, the linked memory is gone.
    service.forget(alice, linked.id)
    assert linked.id not in [h.memory.id for h in on.recall(alice, question, k=3)]


def test_graph_recall_signal_is_off_by_default() -> None:
    assert Limits().graph_weight == 0.0
