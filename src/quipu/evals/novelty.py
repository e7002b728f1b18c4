"""Calibration of the knowledge novelty gate's near-duplicate threshold (issue 25, KNOW-2): the
cosine of each labelled pair (``data/novelty/pairs.json``) under an embedder, embedded as the
gate embeds an article (title, blank line, body), and the threshold that classifies the pairs
best. `python -m quipu.evals.novelty` prints the figures docs/knowledge.md quotes."""

from __future__ import annotations

import itertools
import json
from importlib import resources
from typing import Any

import numpy as np

from quipu.embeddings.base import Embedder


def pairs() -> list[tuple[str, str, bool]]:
    """(text a, text b, same fact?) for every labelled pair."""
    raw = resources.files("quipu.evals").joinpath("data/novelty/pairs.json").read_text("utf-8")
    found = json.loads(raw)["pairs"]
    return [(f"{a}\n\n{b}", f"{c}\n\n{d}", label == "same") for a, b, c, d, label in found]


def calibrate(embedder: Embedder) -> dict[str, Any]:
    """Cosines per label, and the threshold (midway between neighbouring cosines) with the best
    accuracy, ties to the highest threshold (fewest articles gated by mistake)."""
    items = pairs()
    left = embedder.embed_batch([a for a, _, _ in items])
    right = embedder.embed_batch([b for _, b, _ in items])
    cosines = [float(np.dot(x, y)) for x, y in zip(left, right, strict=True)]
    labels = [same for _, _, same in items]
    ordered = sorted(set(cosines))
    cuts = [(lo + hi) / 2 for lo, hi in itertools.pairwise(ordered)]
    best_cut, best_acc = 1.0, -1.0
    for cut in cuts:
        acc = sum((c >= cut) == y for c, y in zip(cosines, labels, strict=True)) / len(items)
        if acc >= best_acc:
            best_cut, best_acc = cut, acc
    same = [c for c, y in zip(cosines, labels, strict=True) if y]
    other = [c for c, y in zip(cosines, labels, strict=True) if not y]
    return {
        "pairs": len(items),
        "same": {"n": len(same), "min": min(same), "max": max(same)},
        "different": {"n": len(other), "min": min(other), "max": max(other)},
        "threshold": round(best_cut, 3),
        "accuracy": round(best_acc, 3),
    }


if __name__ == "__main__":  # pragma: no cover
    from quipu.embeddings.local import LocalEmbedder

    print(json.dumps(calibrate(LocalEmbedder()), indent=2))
