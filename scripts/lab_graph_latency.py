"""Recall latency with and without the entity-graph signal, interleaved (issue 26).

Opens one kept lab store (``scripts/lab_graph.py --stores``) twice, with ``graph_weight`` 0 and
with the value given, and times ``recall(k=10)`` of each LoCoMo question of that conversation
alternately on both (after one warm-up round), so both see the same load. Prints p50 / p95 of
each and their ratio, with the load average.

    nice -n 10 .venv/bin/python scripts/lab_graph_latency.py /tmp/lab-locomo conv-26 0.1 \\
        --vector-cache /tmp/vc_locomo
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import quipu
from quipu.embeddings.local import LocalEmbedder
from quipu.evals.public_bench import SCOPE, locomo_haystacks
from quipu.evals.vector_cache import CachedEmbedder


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stores", type=Path)
    parser.add_argument("conversation")
    parser.add_argument("weight", type=float)
    parser.add_argument("--vector-cache", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo10.json"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--setting", default="graph_weight", help="graph_weight or topic_weight")
    args = parser.parse_args()
    haystack = next(h for h in locomo_haystacks(args.data) if h.haystack_id == args.conversation)
    embedder = CachedEmbedder(LocalEmbedder(), args.vector_cache)
    path = args.stores / f"{args.conversation}.db"
    clients = {
        name: quipu.open(
            path,
            embedder=embedder,
            local_agent_id=args.conversation,
            worker_embedded=False,
            **{args.setting: weight},
        )
        for name, weight in (("off", 0.0), ("on", args.weight))
    }
    times: dict[str, list[float]] = {"off": [], "on": []}
    load = [os.getloadavg()[0]]
    for round_ in range(args.rounds + 1):
        for q in haystack.queries:
            order = ("off", "on") if len(times["off"]) % 2 == 0 else ("on", "off")
            for name in order:
                mark = time.perf_counter()
                clients[name].recall(q.text, scope=SCOPE, k=10)
                if round_ > 0:  # the first round warms both
                    times[name].append((time.perf_counter() - mark) * 1000)
    load.append(os.getloadavg()[0])
    for client in clients.values():
        client.close()
    embedder.close()
    p = {name: (_pct(v, 0.5), _pct(v, 0.95)) for name, v in times.items()}
    print(f"{len(times['on'])} recalls each, load average {load[0]:.1f} -> {load[1]:.1f}")
    for name, (p50, p95) in p.items():
        print(f"{name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print(f"on/off: p50 {p['on'][0] / p['off'][0]:.2f}, p95 {p['on'][1] / p['off'][1]:.2f}")


if __name__ == "__main__":
    main()
