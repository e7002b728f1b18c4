"""Recall's multi-hop signal through topic links on every backend (issue 26, "Multi-hop in
recall": topic-level links between sessions; RECALL-1): with ``topic_weight`` on, a memory
that shares no word with the query but a distinctive word with its best hit is recalled; with
it off (the default) it is not."""

from __future__ import annotations

from dataclasses import replace

from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService

SEED = "Melanie: I signed up for a pottery course and loved the wheel."
LINKED = "Melanie: the wheel squeaks so much that our neighbours complained twice."
OTHERS = (
    "Melanie: we went camping by the lake with the kids.",
    "Melanie: I ran a charity race for mental health last month.",
    "Melanie: the kids love the new puppy we adopted.",
    "Melanie: I read a book about self-care and mindfulness.",
    "Melanie: my husband and I celebrated our anniversary.",
    "Melanie: we saw a meteor shower on our road trip.",
    "Caroline: I am researching adoption agencies.",
    "Caroline: the support group meeting was powerful.",
    "Caroline: I went to a transgender conference in June.",
    "Caroline: my friends threw me a birthday party.",
)


def test_issue26_topic_signal_surfaces_a_memory_linked_only_through_a_distinctive_word(
    service: MemoryService, alice: Principal, local_embedder: LocalEmbedder
) -> None:
    """The squeaking wheel is the pottery course's, but the memory holds no word of the
    question; it shares with the best hit (the pottery course) only "wheel", a word two of the
    scope's memories hold. A shallow first pass (``candidate_depth`` 3) does not find it, so
    the signal must also bring it into the candidates."""
    seed = service.remember(alice, SEED).memory
    linked = service.remember(alice, LINKED).memory
    for text in OTHERS:
        service.remember(alice, text)
    question = "Which pottery course did Melanie sign up for?"
    shallow = replace(service.limits, candidate_depth=3, topic_share=0.2)

    off = MemoryService(service.store, local_embedder, shallow)
    hits = [h.memory.id for h in off.recall(alice, question, k=3)]
    assert hits[0] == seed.id and linked.id not in hits

    on = MemoryService(service.store, local_embedder, replace(shallow, topic_weight=1.0))
    found = on.recall(alice, question, k=3)
    by_id = {h.memory.id: h for h in found.results}
    assert seed.id in by_id and linked.id in by_id and "topic" in by_id[linked.id].matched
    assert "topic_ms" in found.meta["timings"]

    # Only current active memories are reached: once forgotten, the linked memory is gone.
    service.forget(alice, linked.id)
    assert linked.id not in [h.memory.id for h in on.recall(alice, question, k=3)]


def test_issue26_topic_signal_is_off_by_default() -> None:
    assert Limits().topic_weight == 0.0
