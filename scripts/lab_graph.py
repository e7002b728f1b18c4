"""Lab for recall's multi-hop signal through the entity graph (issue 26, ``graph_weight``).

Ingests each LoCoMo conversation / LongMemEval question once into a kept store (the bench's
write path: ``remember`` per turn, the graph built at write time), then ranks every question
under each variant of the settings by reopening the same stores, so a variant costs only its
recalls. Prints session all@5 / all@10 and turn all@5 per category, and each variant's questions
won / lost at session all@5 against the first variant, with the exact sign test's p.

    nice -n 10 .venv/bin/python scripts/lab_graph.py locomo --stores /tmp/lab-locomo \\
        --vector-cache /tmp/vc_locomo base graph_weight=0.3 graph_weight=0.3,graph_share=0.02

A variant is ``NAME=VALUE[,NAME=VALUE...]`` of settings (``base``: the defaults).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import quipu
from quipu.embeddings.local import LocalEmbedder
from quipu.evals.ingest import IngestStats, remember_turn
from quipu.evals.metrics import QuestionResult, score_question, sessions_from_ranked_turns
from quipu.evals.public_bench import SCOPE, Haystack, locomo_haystacks, longmemeval_haystacks
from quipu.evals.vector_cache import CachedEmbedder
from quipu.retrieval import graph_signal, topic_signal

DATA = {
    "locomo": "../shared/data/locomo/locomo10.json",
    "longmemeval": "../shared/data/longmemeval/longmemeval_s_subset_balanced.json",
}


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _variant(spec: str) -> dict[str, Any]:
    """Settings of a variant; ``lab.NAME=VALUE`` sets a constant of
    :mod:`quipu.retrieval.graph_signal` instead (reset to its default for the next variant)."""
    if spec == "base":
        return {}
    return {k: _value(v) for k, v in (part.split("=", 1) for part in spec.split(","))}


_DEFAULTS = {name: getattr(graph_signal, name) for name in ("RELATIVE", "SEED_ROWS", "NEW_ROWS")}
_TOPIC = ("SEED_ROWS", "TOPIC_WORDS", "MIN_ROWS", "MIN_SEEDS", "NEW_ROWS")
_TOPIC_DEFAULTS = {name: getattr(topic_signal, name) for name in _TOPIC}


def _lab(overrides: dict[str, Any]) -> dict[str, Any]:
    """``lab.NAME`` sets a constant of :mod:`quipu.retrieval.graph_signal`, ``topic.NAME`` one
    of :mod:`quipu.retrieval.topic_signal` (each reset to its default for the next variant)."""
    for name, value in _DEFAULTS.items():
        setattr(graph_signal, name, value)
    for name, value in _TOPIC_DEFAULTS.items():
        setattr(topic_signal, name, value)
    for key in [k for k in overrides if k.startswith("lab.")]:
        value = overrides.pop(key)
        setattr(graph_signal, key[4:], bool(value) if key == "lab.RELATIVE" else value)
    for key in [k for k in overrides if k.startswith("topic.")]:
        setattr(topic_signal, key[6:], overrides.pop(key))
    return overrides


def _ingest(h: Haystack, path: Path, embedder: CachedEmbedder) -> dict[str, list[str]]:
    mapping = path.with_suffix(".turns.json")
    if mapping.exists():
        loaded: dict[str, list[str]] = json.loads(mapping.read_text())
        return loaded
    mem = quipu.open(path, embedder=embedder, local_agent_id=h.haystack_id, worker_embedded=False)
    turns_of: dict[str, list[str]] = {}
    stats = IngestStats()
    for turn in h.turns:
        remember_turn(
            mem,
            stats,
            turns_of,
            turn.turn_id,
            turn.text,
            scope=SCOPE,
            observed_at=turn.observed_at,
            session_id=turn.session,
            metadata={"turn_id": turn.turn_id, "session": turn.session},
        )
    mem.close()
    mapping.write_text(json.dumps(turns_of))
    return turns_of


def _sign_p(won: int, lost: int) -> float:
    n = won + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(won, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bench", choices=sorted(DATA))
    parser.add_argument("variants", nargs="+")
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--vector-cache", type=Path, required=True)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = args.data or Path(DATA[args.bench])
    load = locomo_haystacks if args.bench == "locomo" else longmemeval_haystacks
    haystacks = load(data)
    args.stores.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(LocalEmbedder(), args.vector_cache)
    mappings = {}
    for h in haystacks:
        mappings[h.haystack_id] = _ingest(h, args.stores / f"{_safe(h.haystack_id)}.db", embedder)
    results: dict[str, dict[str, dict[str, float]]] = {}
    latency: dict[str, list[float]] = {}
    cats: dict[str, str] = {}
    for spec in args.variants:
        overrides = _lab(_variant(spec))
        scores: dict[str, dict[str, float]] = {}
        times: list[float] = []
        for h in haystacks:
            path = args.stores / f"{_safe(h.haystack_id)}.db"
            mem = quipu.open(
                path,
                embedder=embedder,
                local_agent_id=h.haystack_id,
                worker_embedded=False,
                **overrides,
            )
            sessions = h.turn_to_session()
            turns_of = mappings[h.haystack_id]
            for q in h.queries:
                mark = time.perf_counter()
                found = mem.recall(q.text, scope=SCOPE, k=50)
                times.append((time.perf_counter() - mark) * 1000)
                ranked: list[str] = []
                for hit in found.results:
                    ranked.extend(turns_of.get(hit.memory.id, ()))
                result = QuestionResult(
                    question_id=q.question_id,
                    category=q.category,
                    ranked_sessions=tuple(sessions_from_ranked_turns(ranked, sessions)),
                    gold_sessions=q.gold_sessions,
                    ranked_turns=tuple(ranked),
                    gold_turns=q.gold_turns,
                )
                scores[q.question_id] = score_question(result)
                cats[q.question_id] = q.category
            mem.close()
        results[spec] = scores
        latency[spec] = times
        _report(spec, scores, cats, results[args.variants[0]], times)
    embedder.close()
    if args.out:
        args.out.write_text(json.dumps({"results": results, "categories": cats}))


def _report(
    spec: str,
    scores: dict[str, dict[str, float]],
    cats: dict[str, str],
    base: dict[str, dict[str, float]],
    times: list[float],
) -> None:
    by: dict[str, list[dict[str, float]]] = defaultdict(list)
    for qid, s in scores.items():
        by[cats[qid]].append(s)
        by["all"].append(s)
    parts = []
    for cat in sorted(by):
        rows = by[cat]
        a5 = sum(r["session.all@5"] for r in rows) / len(rows)
        a10 = sum(r["session.all@10"] for r in rows) / len(rows)
        t5 = sum(r.get("turn.all@5", 0.0) for r in rows) / len(rows)
        parts.append(f"{cat}: {a5:.3f}/{a10:.3f}/{t5:.3f} (n={len(rows)})")
    won = sum(1 for q, s in scores.items() if s["session.all@5"] > base[q]["session.all@5"])
    lost = sum(1 for q, s in scores.items() if s["session.all@5"] < base[q]["session.all@5"])
    ordered = sorted(times)
    p50 = ordered[len(ordered) // 2]
    p95 = ordered[int(len(ordered) * 0.95)]
    print(
        f"== {spec}: won {won} lost {lost} (p {_sign_p(won, lost):.3g});"
        f" recall k=50 p50 {p50:.1f} p95 {p95:.1f} ms",
        flush=True,
    )
    for part in parts:
        print("   ", part, flush=True)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


if __name__ == "__main__":
    main()
