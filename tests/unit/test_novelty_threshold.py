"""The novelty gate's near-duplicate threshold is the measured one (issue 25, KNOW-2): the
labelled pairs of ``quipu.evals.novelty`` (12 paraphrases of one fact, 12 pairs on one topic
stating different facts), embedded with the bundled model as the gate embeds an article, put
the best cut at ``NEAR_DUPLICATE``. A change of model, of the pairs or of the constant without
measuring again fails here."""

from __future__ import annotations

from quipu.embeddings.local import LocalEmbedder
from quipu.evals.novelty import calibrate, pairs
from quipu.knowledge import NEAR_DUPLICATE


def test_know_002_near_duplicate_threshold_is_measured_on_the_labelled_pairs(
    local_embedder: LocalEmbedder,
) -> None:
    labelled = pairs()
    assert len(labelled) == 24 and sum(same for _, _, same in labelled) == 12
    found = calibrate(local_embedder)
    assert found["threshold"] == NEAR_DUPLICATE, found
    assert found["accuracy"] >= 0.95, found  # 23 of 24 (docs/knowledge.md, "Novelty gate")
