#!/usr/bin/env python3
"""Build ``src/quipu/retrieval/data/neighbours.tsv.gz``: the query-expansion table.

Every whole word of three or more letters in the bundled model's own WordPiece vocabulary
(about 21,000 words) is embedded alone with the bundled model. For each word, the table keeps
its nearest other words by cosine (at least ``--floor``, at most ``--keep``), one per Snowball
stem and none with the word's own stem. Recall adds those words to a query's BM25 keys at
``query_expansion`` times their cosine (docs/benchmarks.md, sixth round), so "evening" also
finds "night". Nothing here reads benchmark data: the words and the similarities come from the
model alone.

    .venv/bin/python scripts/build_neighbours.py            # rewrites the shipped table

The output is one line per word, ``word<TAB>neighbour cosine ...`` sorted by word, cosines to
two decimals, gzip without a timestamp: the same model gives the same bytes on one machine.
(The int8 model's arithmetic may differ in the last bits between CPUs, which can move a
cosine across a rounding edge; the shipped file is the one committed.)
"""

from __future__ import annotations

import argparse
import gzip
import importlib.resources
import json
import re
import time
from pathlib import Path

import numpy as np

from quipu.embeddings.local import LocalEmbedder
from quipu.retrieval import bm25

OUT = Path(__file__).resolve().parents[1] / "src" / "quipu" / "retrieval" / "data"
WORD = re.compile(r"[a-z]{3,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT / "neighbours.tsv.gz")
    parser.add_argument("--floor", type=float, default=0.6, help="Lowest cosine kept.")
    parser.add_argument("--keep", type=int, default=5, help="Neighbours kept per word.")
    args = parser.parse_args()

    model = LocalEmbedder()
    tokenizer = importlib.resources.files("quipu.embeddings") / "data" / "tokenizer.json"
    vocab = json.loads(tokenizer.read_text(encoding="utf-8"))["model"]["vocab"]
    words = sorted(w for w in vocab if WORD.fullmatch(w) and bm25.tokenize(w))
    stems = [bm25.tokenize(w)[0] for w in words]
    started = time.perf_counter()
    vectors = np.concatenate(
        [model.embed_batch(words[i : i + 256]) for i in range(0, len(words), 256)]
    )
    print(f"embedded {len(words)} words in {time.perf_counter() - started:.1f} s")

    lines = []
    for start in range(0, len(words), 2048):
        block = vectors[start : start + 2048] @ vectors.T
        for row, sims in enumerate(block):
            i = start + row
            nearest = np.argpartition(-sims, 64)[:64]
            nearest = nearest[np.lexsort((nearest, -sims[nearest]))]
            seen = {stems[i]}
            kept: list[str] = []
            for j in nearest:
                if sims[j] < args.floor or len(kept) == args.keep:
                    break
                if stems[j] in seen:
                    continue
                seen.add(stems[j])
                kept.append(f"{words[j]} {sims[j]:.2f}")
            if kept:
                lines.append(f"{words[i]}\t{' '.join(kept)}\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        out.write("".join(lines).encode())
    print(f"{len(lines)} words with neighbours -> {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
