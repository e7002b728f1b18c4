"""Lab, issue 31 third round: context keys counted at a fraction of a memory's own keys.

A memory written in a session is indexed under its own keys plus each key of the message before
it that it does not hold, once (:func:`quipu.retrieval.bm25.indexed_keys`). An assistant answer
thus carries the words of the question before it. This lab counts those context keys at
``--fraction`` of an occurrence instead (0: none; 1: the shipped rule): the SQLite write path
marks them, and the postings count a marked key as that fraction (``Postings.add_counts`` takes
fractional counts; PostgreSQL would need a weight per key). The index differs per fraction, so
each run writes its own; rankings are those of ``scripts/lab_fusion_weight.py`` (defaults, plain
hybrid, dense), compared per question with ``scripts/lab_fusion_weight.py``'s defaults.

    .venv/bin/python scripts/lab_context_fraction.py beam out.json --fraction 0.5 \\
        --data /tmp/beam/chats/100K --vector-cache /work/notes/beam-vc
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import lab_fusion_weight

from quipu.retrieval import bm25
from quipu.storage.sqlite import store

MARK = "\x01"


def install(fraction: float) -> None:
    """Mark context keys on the SQLite write path; count a marked key as ``fraction``."""
    shipped_add = bm25.Postings.add

    def marked_keys(own: Sequence[str], context: Sequence[str]) -> list[str]:
        held = set(own)
        return [*own, *(MARK + key for key in dict.fromkeys(context) if key not in held)]

    def add(self: bm25.Postings, position: int, tokens: Sequence[str]) -> None:
        if not any(t.startswith(MARK) for t in tokens):
            shipped_add(self, position, tokens)
            return
        counts: dict[str, float] = {}
        for token in tokens:
            key, weight = (token[1:], fraction) if token.startswith(MARK) else (token, 1.0)
            if weight > 0:
                counts[key] = counts.get(key, 0.0) + weight
        self.add_counts(position, counts)

    store.indexed_keys = marked_keys  # type: ignore[assignment]
    bm25.Postings.add = add  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bench", choices=("beam", "locomo", "longmemeval", "tech"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--fraction", type=float, required=True)
    parser.add_argument("--data")
    parser.add_argument("--vector-cache", required=True)
    parser.add_argument("--haystacks", type=int, help="only the first N haystacks")
    args = parser.parse_args()
    install(args.fraction)
    results = lab_fusion_weight.run(
        args.bench, args.data, args.vector_cache, ["defaults"], args.haystacks, args.out
    )
    args.out.write_text(json.dumps(results))
    lab_fusion_weight.report(results)


if __name__ == "__main__":
    main()
