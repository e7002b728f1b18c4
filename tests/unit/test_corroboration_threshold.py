"""The near-duplicate corroboration threshold is the measured one (issue 22 gap 3, CONSOL-3):
calibrating on the labelled LoCoMo pairs (ids only, tests/data/corroboration_pairs.json; the
texts read from the public data set) gives NEAR_CORROBORATION."""

from __future__ import annotations

from pathlib import Path

import pytest

from quipu.corroboration import NEAR_CORROBORATION
from quipu.embeddings.local import LocalEmbedder
from quipu.evals.corroboration import calibrate, pairs

LABELS = Path(__file__).parents[1] / "data" / "corroboration_pairs.json"
DATA = Path("/work/shared/data")


def test_consol_003_threshold_is_the_measured_one(local_embedder: LocalEmbedder) -> None:
    if not (DATA / "locomo" / "locomo10.json").is_file():
        pytest.skip("the public LoCoMo data set is not on this machine")
    items = pairs(LABELS, DATA)
    assert len(items) >= 30 and {True, False} == {same for _, _, same in items}
    found = calibrate(local_embedder, items)
    assert found["threshold"] == NEAR_CORROBORATION
    assert found["accuracy"] >= 0.85
