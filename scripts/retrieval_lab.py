"""Offline retrieval lab: try a scoring idea on LoCoMo and LongMemEval in seconds.

``quipu bench locomo|longmemeval`` measures the shipped pipeline end to end (minutes per run:
every turn goes through ``remember``). This script is for the step before: it embeds every
turn and question once with the bundled model (cached in ``--cache``), builds Quipu's own BM25
(``quipu.retrieval.bm25``: same tokenizer, same scoring code) over each haystack, and scores
named variants with the harness's protocol and metrics (``quipu.evals``). Variants that look
good here are then implemented and measured with ``quipu bench``; docs/benchmarks.md records
both.

    .venv/bin/python scripts/retrieval_lab.py --cache /tmp/quipu-lab            # every variant
    .venv/bin/python scripts/retrieval_lab.py --cache /tmp/quipu-lab rrf score  # some

The first run embeds ~16k turns (minutes on two cores); later runs read the cache.
"""

from __future__ import annotations

import argparse
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quipu.evals.metrics import recall_all_at_k, recall_any_at_k, sessions_from_ranked_turns
from quipu.evals.public_bench import Haystack, locomo_haystacks, longmemeval_haystacks
from quipu.retrieval import bm25
from quipu.retrieval.temporal import query_windows

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
FILES = {
    "locomo": ("locomo/locomo10.json", locomo_haystacks),
    "longmemeval": ("longmemeval/longmemeval_s_subset_balanced.json", longmemeval_haystacks),
}
DEPTH = 100
Scores = npt.NDArray[np.float64]


@dataclass
class Prepared:
    haystack: Haystack
    turns: npt.NDArray[np.float32]
    queries: npt.NDArray[np.float32]
    tokens: list[list[str]]
    query_tokens: list[list[str]]
    observed: list[datetime]
    prev: npt.NDArray[np.int64]
    next: npt.NDArray[np.int64]
    cache: dict[bool, bm25.Postings] = field(default_factory=dict)

    def postings(self, neighbours: bool = False) -> bm25.Postings:
        """BM25 postings of the turns (or of each turn with its session neighbours)."""
        if neighbours in self.cache:
            return self.cache[neighbours]
        docs = self.tokens
        if neighbours:
            docs = [
                [*docs[i], *(docs[p] if p >= 0 else []), *(docs[n] if n >= 0 else [])]
                for i, (p, n) in enumerate(zip(self.prev, self.next, strict=True))
            ]
        index = bm25.Postings()
        index.bulk_add(docs)
        self.cache[neighbours] = index
        return index


def prepare(name: str, cache: Path) -> list[Prepared]:
    relative, loader = FILES[name]
    haystacks = loader(DATA / relative)
    path = cache / f"{name}.pkl"
    if path.exists():
        vectors = pickle.loads(path.read_bytes())
    else:
        from quipu.embeddings.local import LocalEmbedder

        embedder = LocalEmbedder()
        vectors = [
            (
                embedder.embed_batch([t.text for t in h.turns]),
                embedder.embed_batch([q.text for q in h.queries]),
            )
            for h in haystacks
        ]
        cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(vectors))
    out = []
    for haystack, (turns, queries) in zip(haystacks, vectors, strict=True):
        sessions = [t.session for t in haystack.turns]
        n = len(sessions)
        out.append(
            Prepared(
                haystack,
                turns,
                queries,
                bm25.tokenize_many([t.text for t in haystack.turns]),
                bm25.tokenize_many([q.text for q in haystack.queries]),
                [t.observed_at for t in haystack.turns],
                np.array([i - 1 if i and sessions[i - 1] == sessions[i] else -1 for i in range(n)]),
                np.array(
                    [
                        i + 1 if i < n - 1 and sessions[i + 1] == sessions[i] else -1
                        for i in range(n)
                    ]
                ),
            )
        )
    return out


def bm25_scores(index: bm25.Postings, tokens: list[str], k1: float, b: float) -> Scores:
    saved = bm25.K1, bm25.B
    bm25.K1, bm25.B = k1, b
    try:
        scores = index.scores(tokens)
    finally:
        bm25.K1, bm25.B = saved
    return np.zeros(len(index)) if scores is None else scores.astype(np.float64)


def in_window(p: Prepared, question: int) -> Scores:
    windows = query_windows(p.haystack.queries[question].text)
    return np.array(
        [1.0 if any(w.start <= at < w.end for w in windows) else 0.0 for at in p.observed]
    )


@dataclass(frozen=True)
class Variant:
    fusion: str = "score"  # score | rrf | bm25 | cosine
    weight_text: float = 0.3
    k1: float = 0.9
    b: float = 0.4
    temporal: float = 0.2
    rrf_k: int = 60
    depth: int = DEPTH
    neighbours: float = 0.0
    """Weight of BM25 over each turn plus its session neighbours (needs a Store change)."""

    def scores(self, p: Prepared, q: int) -> Scores:
        cosine = (p.turns @ p.queries[q]).astype(np.float64)
        text = bm25_scores(p.postings(), p.query_tokens[q], self.k1, self.b)
        if self.neighbours:
            extra = bm25_scores(p.postings(True), p.query_tokens[q], self.k1, self.b)
            text = text / (text.max() or 1.0) + self.neighbours * extra / (extra.max() or 1.0)
        if self.fusion == "bm25":
            return text
        if self.fusion == "cosine":
            return cosine
        by_text = np.argsort(-text, kind="stable")[: self.depth]
        by_text = by_text[text[by_text] > 0]
        by_vector = np.argsort(-cosine, kind="stable")[: self.depth]
        pool = np.union1d(by_text, by_vector)
        out = np.full(len(cosine), -1e9)
        if self.fusion == "rrf":
            fused = np.zeros(len(cosine))
            for order in (by_text, by_vector):
                fused[order] += 1.0 / (self.rrf_k + np.arange(1, len(order) + 1))
            out[pool] = fused[pool]
            return out
        keyword = np.zeros(len(cosine))
        if len(by_text):
            keyword[by_text] = text[by_text] / text[by_text[0]]
        vector = np.full(len(cosine), cosine[by_vector[-1]])
        vector[by_vector] = cosine[by_vector]
        fused = (1 - self.weight_text) * vector + self.weight_text * keyword
        if self.temporal:
            fused += self.temporal * in_window(p, q)
        out[pool] = fused[pool]
        return out


def evaluate(
    prepared: list[Prepared], score: Callable[[Prepared, int], Scores]
) -> dict[str, float]:
    rows: dict[str, list[float]] = {}
    for p in prepared:
        ids = [t.turn_id for t in p.haystack.turns]
        to_session = p.haystack.turn_to_session()
        for q, query in enumerate(p.haystack.queries):
            order = np.argsort(-score(p, q), kind="stable")[:50]
            ranked = [ids[i] for i in order]
            sessions = sessions_from_ranked_turns(ranked, to_session)
            for k in (5, 10):
                rows.setdefault(f"all@{k}", []).append(
                    recall_all_at_k(sessions, query.gold_sessions, k)
                )
            rows.setdefault("any@5", []).append(recall_any_at_k(sessions, query.gold_sessions, 5))
            rows.setdefault("turn all@5", []).append(recall_all_at_k(ranked, query.gold_turns, 5))
    return {name: float(np.mean(values)) for name, values in rows.items()}


VARIANTS = {
    "bm25-old": Variant(fusion="bm25", k1=1.2, b=0.75),
    "cosine": Variant(fusion="cosine"),
    "rrf-old": Variant(fusion="rrf", k1=1.2, b=0.75, temporal=0.0, depth=60),
    "rrf-new-bm25": Variant(fusion="rrf", temporal=0.0, depth=60),
    "score-a0.3-depth60-old-bm25": Variant(k1=1.2, b=0.75, temporal=0.0, depth=60),
    "score-a0.5-old-bm25": Variant(weight_text=0.5, k1=1.2, b=0.75, temporal=0.0),
    "score-a0.3-old-bm25": Variant(k1=1.2, b=0.75, temporal=0.0),
    "score-a0.3-temporal-old-bm25": Variant(k1=1.2, b=0.75),
    "shipped": Variant(),
    "shipped-no-temporal": Variant(temporal=0.0),
    "shipped+neighbours": Variant(neighbours=1.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="Where vectors are cached.")
    parser.add_argument("variants", nargs="*", help=f"Some of: {', '.join(VARIANTS)}")
    args = parser.parse_args()
    data = {name: prepare(name, args.cache) for name in FILES}
    print(
        f"{'variant':30} {'LoCoMo all@5':>13} {'all@10':>7} {'turn@5':>7}   {'LME all@5':>9} "
        f"{'all@10':>7} {'turn@5':>7}"
    )
    for name in args.variants or VARIANTS:
        variant = VARIANTS[name]
        a = evaluate(data["locomo"], variant.scores)
        b = evaluate(data["longmemeval"], variant.scores)
        print(
            f"{name:30} {a['all@5']:13.3f} {a['all@10']:7.3f} {a['turn all@5']:7.3f}   "
            f"{b['all@5']:9.3f} {b['all@10']:7.3f} {b['turn all@5']:7.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
