"""Lab, issue 31 third round: per-query keyword weight and the vector side, on one index.

The second round (``scripts/lab_length_norm.py``) found that a length prior trades BEAM for the
generated technical chats. This round tries the levers it left as next ideas, all read at query
time, so each haystack is written once with the shipped defaults and every question is ranked
under each variant on that same index (paired per question):

- ``informative``: the keyword half's weight scaled per query by how informative the query's
  keys are in the scope (mean or max of idf / its ceiling ``log(1 + (N + 0.5) / 1.5)``, over the
  keys the scope holds): a chat where every message says "flask" gives a keyword match on
  "flask" little evidence.
- ``idf-keys``: each query key weighted by that same normalised idf inside BM25 (rare keys count
  more than their idf already makes them).
- ``agree``: the keyword weight scaled by how much the keyword and vector lists agree (shared
  keys among the first 10 of each), in either direction.
- the vector side with the keyword half off (``weight_text=0``), focus, feedback and the session
  aggregate switched off one at a time and together, against plain dense retrieval.

    .venv/bin/python scripts/lab_fusion_weight.py beam out.json --data /tmp/beam/chats/100K \\
        --vector-cache /work/notes/beam-vc
    .venv/bin/python scripts/lab_fusion_weight.py locomo|longmemeval|tech out.json --vector-cache F

docs/benchmarks.md, "Third round", has the figures it gave.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from lab_length_norm import haystacks, report  # the second round's harness

from quipu.core.query import Candidate
from quipu.embeddings.local import LocalEmbedder
from quipu.evals import public_bench
from quipu.evals.metrics import sessions_from_ranked_turns
from quipu.evals.vector_cache import CachedEmbedder
from quipu.retrieval.bm25 import query_tokens
from quipu.storage.sqlite.search import now_micros

Scale = Callable[[Any, Any, str, dict[str, list[Candidate]]], float]


def informativeness(pipeline: Any, ref: Any, text: str, how: str) -> tuple[float, dict[str, float]]:
    """(mean or max normalised idf of the query keys the scope holds, each key's value)."""
    keys = list(dict.fromkeys(query_tokens(text)))
    rows, frequencies = pipeline.port.key_frequencies(ref, keys)
    if rows == 0:
        return 1.0, {}
    ceiling = math.log(1.0 + (rows + 0.5) / 1.5)
    values = {
        key: math.log(1.0 + (rows - df + 0.5) / (df + 0.5)) / ceiling
        for key in keys
        if (df := frequencies.get(key, 0)) > 0
    }
    if not values:
        return 1.0, {}
    picked = max(values.values()) if how == "max" else sum(values.values()) / len(values)
    return picked, values


def informative(how: str, power: float) -> Scale:
    def scale(pipeline: Any, ref: Any, text: str, lists: dict[str, list[Candidate]]) -> float:
        return informativeness(pipeline, ref, text, how)[0] ** power

    return scale


def agreement(depth: int, full_at: float, inverse: bool) -> Scale:
    """Share of the first ``depth`` keyword keys also among the first ``depth`` vector keys,
    reaching a scale of 1 at ``full_at`` (``inverse``: 1 when they disagree, falling)."""

    def scale(pipeline: Any, ref: Any, text: str, lists: dict[str, list[Candidate]]) -> float:
        words = {c.key for c in lists.get("text", [])[:depth]}
        near = {c.key for c in lists.get("semantic", [])[:depth]}
        if not words or not near:
            return 1.0
        shared = len(words & near) / depth
        value = min(1.0, shared / full_at)
        return 1.0 - value if inverse else value

    return scale


#: name -> (setting overrides, per-query keyword scale or None, idf-weighted query keys)
VARIANTS: dict[str, tuple[dict[str, float], Scale | None, bool]] = {
    "defaults": ({}, None, False),
    "informative mean": ({}, informative("mean", 1.0), False),
    "informative mean^2": ({}, informative("mean", 2.0), False),
    "informative max": ({}, informative("max", 1.0), False),
    "idf-keys": ({}, None, True),
    "agree@10 full at 0.3": ({}, agreement(10, 0.3, False), False),
    "agree@10 full at 0.5": ({}, agreement(10, 0.5, False), False),
    "disagree@10": ({}, agreement(10, 0.5, True), False),
    "vector levers off": (
        {"focus_weight": 0.0, "feedback_weight": 0.0, "session_weight": 0.0},
        None,
        False,
    ),
    "weight_text=0": ({"weight_text": 0.0}, None, False),
    "wt0, focus off": ({"weight_text": 0.0, "focus_weight": 0.0}, None, False),
    "wt0, feedback off": ({"weight_text": 0.0, "feedback_weight": 0.0}, None, False),
    "wt0, session off": ({"weight_text": 0.0, "session_weight": 0.0}, None, False),
    "wt0, all off": (
        {"weight_text": 0.0, "focus_weight": 0.0, "feedback_weight": 0.0, "session_weight": 0.0},
        None,
        False,
    ),
}


def patch(pipeline: Any, scale: Scale | None, idf_keys: bool) -> None:
    """Per-query keyword weight on ``pipeline._fuse``; idf-weighted keys on its keyword search.
    A lab reaches into the pipeline and the SQLite index; the product may not."""
    fuse, search = pipeline.__class__._fuse, pipeline.__class__._text_candidates
    pipeline.__dict__.pop("_fuse", None)
    pipeline.__dict__.pop("_text_candidates", None)
    if scale is not None:

        def scaled_fuse(
            ref: Any, text: str, vector: Any, flt: Any, depth: int, lists: Any, cache: Any
        ) -> Any:
            shipped = pipeline.limits
            factor = scale(pipeline, ref, text, lists)
            pipeline.limits = replace(shipped, weight_text=shipped.weight_text * factor)
            try:
                return fuse(pipeline, ref, text, vector, flt, depth, lists, cache)
            finally:
                pipeline.limits = shipped

        pipeline._fuse = scaled_fuse
    if idf_keys:

        def weighted_search(ref: Any, text: str, flt: Any, depth: int) -> Any:
            _, values = informativeness(pipeline, ref, text, "mean")
            if not values:
                return search(pipeline, ref, text, flt, depth)
            index = pipeline.port._index(ref)
            found, scanned, path = index.search_text(values, flt, depth, now_micros())
            from quipu.storage.base import SearchInfo

            return found, SearchInfo(path, scanned)

        pipeline._text_candidates = weighted_search


def run(
    bench: str,
    data: str | None,
    cache_path: str,
    names: list[str],
    first: int | None,
    partial: Path,
) -> dict[str, Any]:
    """Rankings per variant; written to ``partial`` after each haystack, so a long run that is
    stopped still leaves the haystacks it finished."""
    cache = CachedEmbedder(LocalEmbedder(), cache_path)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in (*names, "hybrid", "dense")}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            systems = public_bench.make_systems(cache, Path(tmp), {})
            for haystack in haystacks(bench, data)[:first]:
                sessions = haystack.turn_to_session()
                ranker: Any = systems.quipu.index(haystack, lambda _: None)
                hybrid = systems.baselines[2].index(haystack, lambda _: None)
                dense = systems.baselines[1].index(haystack, lambda _: None)
                pipeline = ranker._mem.service.pipeline
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
                            "category": query.category,
                            "gold_turns": sorted(query.gold_turns),
                            "gold_sessions": sorted(query.gold_sessions),
                            "turns": ranked[:10],
                            "sessions": sessions_from_ranked_turns(ranked, sessions)[:10],
                        }
                    )

                try:
                    for query in haystack.queries:
                        record("hybrid", hybrid.rank(query, 50), query)
                        record("dense", dense.rank(query, 50), query)
                    for name in names:
                        settings, scale, idf_keys = VARIANTS[name]
                        pipeline.limits = replace(shipped, **settings)
                        patch(pipeline, scale, idf_keys)
                        for query in haystack.queries:
                            record(name, ranker.rank(query, 50), query)
                finally:
                    patch(pipeline, None, False)
                    pipeline.limits = shipped
                    ranker.close()
                    hybrid.close()
                    dense.close()
                partial.write_text(json.dumps(out))
                print(haystack.haystack_id, flush=True)
    finally:
        cache.close()
    return out


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
    results = run(args.bench, args.data, args.vector_cache, names, args.haystacks, args.out)
    args.out.write_text(json.dumps(results))
    report(results)


if __name__ == "__main__":
    main()
