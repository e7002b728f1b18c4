#!/usr/bin/env python3
"""What placement by ontology (GRAPH-2) adds to ``remember``, printed as JSON.

    python scripts/bench_placement.py --database sqlite:/tmp/p.db
    python scripts/bench_placement.py --database postgresql://...

Remembers ``--turns`` LoCoMo dialogue turns (read from ``--locomo``, never copied) with the real
bundled embedder in three arms, interleaved turn by turn in one store (same texts, store size
and machine load): ``graph`` (the plain insert, then the graph write: no placement installed),
``no_policy`` (placement installed, the tenant declared nothing: one policy read more) and
``policy`` (the tenant's policy places a type in the tenant scope: the decision, the memory,
its graph and the decision's audit event in one transaction). Reports each arm's mean, p50 and
p95 and each placement arm's ratio to ``graph``, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_graph_write import pct, turns
from bench_store import open_store

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.graph.placement import Placement
from quipu.graph.service import GraphService
from quipu.memories import MemoryService


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--locomo", type=Path, default=Path("/work/shared/data/locomo/locomo10.json")
    )
    args = parser.parse_args()
    texts = turns(args.locomo, args.turns)
    store, cleanup = open_store(args.database, {})
    service = MemoryService(store, LocalEmbedder(), Limits())
    graph = GraphService(service)
    service.graph = graph
    placement = Placement(graph)
    admin = Principal("p", "k-admin", Role.ADMIN, agent_id="ops")
    placement.declare(admin, types=[{"type": "event", "scope": "tenant"}])
    arms = {
        "graph": (None, Principal("g", "k-g", Role.AGENT, agent_id="g")),
        "no_policy": (placement, Principal("n", "k-n", Role.AGENT, agent_id="n")),
        "policy": (placement, Principal("p", "k-p", Role.AGENT, agent_id="p")),
    }
    for text in texts[:20]:  # warm the model and the connection pool
        service.remember(Principal("w", "k-w", Role.AGENT, agent_id="warm"), text)
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    for i, text in enumerate(texts):
        names = list(arms)
        names = names[i % 3 :] + names[: i % 3]
        for arm in names:
            service.placement, who = arms[arm]
            started = time.perf_counter()
            service.remember(who, text)
            times[arm].append((time.perf_counter() - started) * 1000)
    report: dict[str, object] = {
        "database": args.database.split(":", 1)[0],
        "turns": len(texts),
        "load_avg": os.getloadavg(),
    }
    for arm, values in times.items():
        report[arm] = {
            "mean_ms": round(statistics.fmean(values), 2),
            "p50_ms": round(pct(values, 0.5), 2),
            "p95_ms": round(pct(values, 0.95), 2),
        }
    base = statistics.fmean(times["graph"])
    for arm in ("no_policy", "policy"):
        report[f"{arm}_mean_ratio"] = round(statistics.fmean(times[arm]) / base, 3)
    print(json.dumps(report, indent=2))
    service.close()
    cleanup()


if __name__ == "__main__":
    main()
