"""Lab: recall variants that need no re-indexing, on one index per haystack (issue 31).

Each haystack is written once with the shipped defaults (as `quipu bench` writes it); then every
question is ranked 50 turns deep under each variant: settings swapped on the recall pipeline,
BM25's k1 and b swapped in :mod:`quipu.retrieval.bm25` (both are read at query time), and the
plain hybrid baseline beside them. The ``defaults`` and ``weight_text=0`` rows reproduce
`quipu bench beam` exactly (0.214 and 0.299 turn all@5), so a variant's figures are what the
bench would give with that code. Writes the per-question rankings as JSON and prints all@k per
variant with the questions won and lost against ``defaults``.

    .venv/bin/python scripts/lab_length_norm.py beam out.json --data /tmp/beam/chats/100K \\
        --vector-cache /work/notes/beam-vc
    .venv/bin/python scripts/lab_length_norm.py locomo|longmemeval|tech out.json --vector-cache F

docs/benchmarks.md, "BEAM 100K, measured", has the figures it gave.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from quipu.embeddings.local import LocalEmbedder
from quipu.evals import public_bench
from quipu.evals.metrics import sessions_from_ranked_turns
from quipu.evals.vector_cache import CachedEmbedder
from quipu.retrieval import bm25

#: name -> (pipeline setting overrides, BM25 b, BM25 k1)
VARIANTS: dict[str, tuple[dict[str, float], float, float]] = {
    "defaults": ({}, 0.4, 0.9),
    "weight_text=0": ({"weight_text": 0.0}, 0.4, 0.9),
    "weight_text=0.15": ({"weight_text": 0.15}, 0.4, 0.9),
    "b 0.6": ({}, 0.6, 0.9),
    "b 0.75": ({}, 0.75, 0.9),
    "b 0.9": ({}, 0.9, 0.9),
    "b 1": ({}, 1.0, 0.9),
    "b 1, k1 0.5": ({}, 1.0, 0.5),
    "b 1, k1 1.2": ({}, 1.0, 1.2),
    "b 0.75, k1 0.5": ({}, 0.75, 0.5),
    "b 1, weight_text=0.2": ({"weight_text": 0.2}, 1.0, 0.9),
    "b 1, focus_weight=0": ({"focus_weight": 0.0}, 1.0, 0.9),
    "b 1, feedback_weight=0": ({"feedback_weight": 0.0}, 1.0, 0.9),
    "b 1, session_weight=0": ({"session_weight": 0.0}, 1.0, 0.9),
}
DEFAULT_DATA = {
    "locomo": "../shared/data/locomo/locomo10.json",
    "longmemeval": "../shared/data/longmemeval/longmemeval_s_subset_balanced.json",
}


def haystacks(bench: str, data: str | None) -> list[public_bench.Haystack]:
    if bench == "beam":
        from quipu.evals.beam import beam_haystacks

        if data is None:
            raise SystemExit("beam needs --data (BEAM's chats/100K folder)")
        return beam_haystacks(data)
    if bench == "tech":
        from quipu.evals import tech_corpus

        return tech_corpus.tech_haystacks(tech_corpus.generate(31, 20), "all", None)
    path = data or DEFAULT_DATA[bench]
    if bench == "locomo":
        return public_bench.locomo_haystacks(path)
    return public_bench.longmemeval_haystacks(path)


def run(
    bench: str, data: str | None, cache_path: str, names: list[str], first: int | None
) -> dict[str, Any]:
    cache = CachedEmbedder(LocalEmbedder(), cache_path)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in (*names, "hybrid")}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            systems = public_bench.make_systems(cache, Path(tmp), {})
            for haystack in haystacks(bench, data)[:first]:
                sessions = haystack.turn_to_session()
                ranker: Any = systems.quipu.index(haystack, lambda _: None)
                hybrid = systems.baselines[2].index(haystack, lambda _: None)
                pipeline = ranker._mem.service.pipeline  # a lab reaches in; the product may not
                shipped = pipeline.limits

                def record(
                    name: str,
                    ranked: list[str],
                    query: public_bench.Query,
                    sessions: dict[str, str] = sessions,
                ) -> None:
                    out[name].append(
                        {
                            "q": query.question_id,
                            "gold_turns": sorted(query.gold_turns),
                            "gold_sessions": sorted(query.gold_sessions),
                            "turns": ranked[:10],
                            "sessions": sessions_from_ranked_turns(ranked, sessions)[:10],
                        }
                    )

                try:
                    for query in haystack.queries:
                        record("hybrid", hybrid.rank(query, 50), query)
                    for name in names:
                        settings, bm25.B, bm25.K1 = VARIANTS[name]
                        pipeline.limits = replace(shipped, **settings)
                        for query in haystack.queries:
                            record(name, ranker.rank(query, 50), query)
                finally:
                    bm25.B, bm25.K1, pipeline.limits = 0.4, 0.9, shipped
                    ranker.close()
                    hybrid.close()
                print(haystack.haystack_id, flush=True)
    finally:
        cache.close()
    return out


def report(results: dict[str, list[dict[str, Any]]]) -> None:
    def hit(row: dict[str, Any], level: str, k: int) -> bool:
        gold = set(row["gold_turns" if level == "turn" else "gold_sessions"])
        return gold <= set(row["turns" if level == "turn" else "sessions"][:k])

    base = results["defaults"]
    print("variant | turn all@5 | turn all@10 | session all@5 | won / lost @5 (turn, session)")
    for name, rows in results.items():
        cells = [
            f"{sum(hit(r, level, k) for r in rows) / len(rows):.3f}"
            for level, k in (("turn", 5), ("turn", 10), ("session", 5))
        ]
        paired = []
        for level in ("turn", "session"):
            pairs = list(zip(rows, base, strict=True))
            won = sum(hit(r, level, 5) and not hit(b, level, 5) for r, b in pairs)
            lost = sum(hit(b, level, 5) and not hit(r, level, 5) for r, b in pairs)
            paired.append(f"{won} / {lost}")
        print(f"{name} | {' | '.join(cells)} | {', '.join(paired)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bench", choices=("beam", "locomo", "longmemeval", "tech"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--data")
    parser.add_argument("--vector-cache", required=True)
    parser.add_argument("--variants", help="comma-separated names (default: all)")
    parser.add_argument("--haystacks", type=int, help="only the first N haystacks")
    args = parser.parse_args()
    names = args.variants.split(",") if args.variants else list(VARIANTS)
    if "defaults" not in names:
        names.insert(0, "defaults")
    results = run(args.bench, args.data, args.vector_cache, names, args.haystacks)
    args.out.write_text(json.dumps(results))
    report(results)


if __name__ == "__main__":
    main()
