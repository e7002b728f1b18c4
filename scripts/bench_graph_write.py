#!/usr/bin/env python3
"""What the entity graph adds to ``remember`` (issue 26: at most 25 %), printed as JSON.

    python scripts/bench_graph_write.py --database sqlite:/tmp/g.db
    python scripts/bench_graph_write.py --database postgresql://...

Remembers ``--turns`` LoCoMo dialogue turns (``"<speaker>: <text>"``, read from
``--locomo``, never copied) through the memory use cases with the real bundled embedder, once
with write-time graph extraction and once without, interleaved turn by turn in two agents'
scopes of one store (so both arms see the same texts, the same store size and the same machine
load). Reports each arm's mean, p50 and p95 latency, the added share, and the time of the
extraction alone (no I/O).
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

from bench_store import open_store

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.graph.extract import extract
from quipu.graph.service import GraphService
from quipu.memories import MemoryService


def turns(path: Path, limit: int) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        n = 1
        while f"session_{n}" in conv:
            for turn in conv[f"session_{n}"]:
                found.append(f"{turn['speaker']}: {turn['text']}")
            n += 1
    return found[:limit]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument(
        "--locomo", type=Path, default=Path("/work/shared/data/locomo/locomo10.json")
    )
    args = parser.parse_args()
    texts = turns(args.locomo, args.turns)
    store, cleanup = open_store(args.database, {})
    service = MemoryService(store, LocalEmbedder(), Limits())
    graph = GraphService(service)
    plain = Principal("t", "k-plain", Role.AGENT, agent_id="plain")
    graphed = Principal("t", "k-graph", Role.AGENT, agent_id="graph")
    for text in texts[:20]:  # warm the model and the connection pool
        service.remember(Principal("t", "k-w", Role.AGENT, agent_id="warm"), text)
    times: dict[str, list[float]] = {"plain": [], "graph": []}
    for i, text in enumerate(texts):
        order = [("plain", plain), ("graph", graphed)]
        if i % 2:
            order.reverse()
        for arm, who in order:
            service.graph = graph if arm == "graph" else None
            started = time.perf_counter()
            service.remember(who, text)
            times[arm].append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    for text in texts:
        extract(text)
    extract_ms = (time.perf_counter() - started) * 1000 / len(texts)
    report = {
        "database": args.database.split(":", 1)[0],
        "turns": len(texts),
        "load_avg": os.getloadavg(),
        "extract_only_ms_mean": round(extract_ms, 3),
    }
    for arm, values in times.items():
        report[arm] = {
            "mean_ms": round(statistics.fmean(values), 2),
            "p50_ms": round(pct(values, 0.5), 2),
            "p95_ms": round(pct(values, 0.95), 2),
        }
    report["added_mean_pct"] = round(
        100 * (report["graph"]["mean_ms"] / report["plain"]["mean_ms"] - 1), 1  # type: ignore[index]
    )
    report["added_p50_pct"] = round(
        100 * (report["graph"]["p50_ms"] / report["plain"]["p50_ms"] - 1), 1  # type: ignore[index]
    )
    print(json.dumps(report, indent=2))
    service.close()
    cleanup()


if __name__ == "__main__":
    main()
