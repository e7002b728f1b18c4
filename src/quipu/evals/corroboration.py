"""Calibration of the near-duplicate corroboration threshold (issue 22, CONSOL-3): the cosine of
each labelled pair of ``tests/data/corroboration_pairs.json`` under an embedder, the statements
read by id from the public LoCoMo conversations (never copied into the repository), and the
threshold that classifies the pairs best, ties to the highest (fewest memories verified by
mistake). ``python -m quipu.evals.corroboration LABELS DATA_DIR`` prints the figures
docs/governance.md quotes."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from quipu.embeddings.base import Embedder


def pairs(labels: Path, data_dir: Path) -> list[tuple[str, str, bool]]:
    """(statement a, statement b, same fact?) for every labelled pair."""
    spec = json.loads(labels.read_text("utf-8"))
    samples = {
        s["sample_id"]: s for s in json.loads((data_dir / spec["dataset"]).read_text("utf-8"))
    }
    return [
        (
            _text(samples[p["sample"]], p["a"]),
            _text(samples[p["sample"]], p["b"]),
            p["label"] == "same",
        )
        for p in spec["pairs"]
    ]


def calibrate(embedder: Embedder, items: list[tuple[str, str, bool]]) -> dict[str, Any]:
    """Cosines per label and the best threshold (midway between neighbouring cosines)."""
    left = embedder.embed_batch([a for a, _, _ in items])
    right = embedder.embed_batch([b for _, b, _ in items])
    cosines = [float(np.dot(x, y)) for x, y in zip(left, right, strict=True)]
    labels = [same for _, _, same in items]
    ordered = sorted(set(cosines))
    best_cut, best_acc = 1.0, -1.0
    for lo, hi in itertools.pairwise(ordered):
        cut = (lo + hi) / 2
        acc = sum((c >= cut) == y for c, y in zip(cosines, labels, strict=True)) / len(items)
        if acc >= best_acc:
            best_cut, best_acc = cut, acc
    same = [c for c, y in zip(cosines, labels, strict=True) if y]
    other = [c for c, y in zip(cosines, labels, strict=True) if not y]
    return {
        "pairs": len(items),
        "same": {"n": len(same), "min": round(min(same), 3), "max": round(max(same), 3)},
        "different": {"n": len(other), "min": round(min(other), 3), "max": round(max(other), 3)},
        "threshold": round(best_cut, 3),
        "accuracy": round(best_acc, 3),
        "false_corroborations": sum(c >= best_cut for c in other),
    }


def _text(sample: dict[str, Any], ref: dict[str, Any]) -> str:
    if "turn" in ref:
        conv = sample["conversation"]
        session = "session_" + str(ref["turn"]).split(":")[0][1:]
        return next(str(t["text"]) for t in conv[session] if t["dia_id"] == ref["turn"])
    fact = sample["observation"][ref["observation"]][ref["speaker"]][ref["index"]]
    return str(fact[0])


if __name__ == "__main__":  # pragma: no cover
    from quipu.embeddings.local import LocalEmbedder

    found = pairs(Path(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps(calibrate(LocalEmbedder(), found), indent=2))
