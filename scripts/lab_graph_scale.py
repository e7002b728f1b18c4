"""Recall latency of the multi-hop signals at a large scope, variants interleaved (issue 26).

Opens one store (a scale store: ``quipu.evals.scale``, scopes ``scale-N``) once per variant and
recalls LoCoMo's questions (``quipu.evals.scale.questions``) in ``--owner``'s agent scope on
every variant in turn, the order rotating per question, after one warm-up round, so every
variant sees the same load. Prints p50 / p95 of each, their ratio to the first variant, the
signal stages' own p95 and the load average. The store must hold graph rows for the entity
signal to read (``quipu graph backfill``); run it on a copy, opening a store writes to it.

    nice -n 10 .venv/bin/python scripts/lab_graph_scale.py --db /tmp/scale.db \\
        --owner scale-100000 base graph_weight=0.1 topic_weight=0.1

A variant is ``NAME=VALUE[,NAME=VALUE...]`` of settings (``base``: the defaults).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from quipu.embedded import open as open_store
from quipu.evals.scale import questions


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _variant(spec: str) -> dict[str, Any]:
    if spec == "base":
        return {}
    return {k: _value(v) for k, v in (part.split("=", 1) for part in spec.split(","))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+")
    parser.add_argument("--db", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo10.json"))
    args = parser.parse_args()
    dated, others = questions(args.data, args.questions)
    asked = (others + dated)[: args.questions]
    clients = {
        spec: open_store(args.db, worker_embedded=False, **_variant(spec)) for spec in args.variants
    }
    principals = {
        spec: replace(mem.principal, agent_id=args.owner) for spec, mem in clients.items()
    }
    times: dict[str, list[float]] = {spec: [] for spec in args.variants}
    stages: dict[str, dict[str, list[float]]] = {spec: {} for spec in args.variants}
    load = [os.getloadavg()[0]]
    for round_ in range(2):  # the first round warms every variant
        for i, q in enumerate(asked):
            order = (
                args.variants[i % len(args.variants) :] + args.variants[: i % len(args.variants)]
            )
            for spec in order:
                mark = time.perf_counter()
                result = clients[spec].service.recall(principals[spec], q, scope="agent", k=10)
                if round_ > 0:
                    times[spec].append((time.perf_counter() - mark) * 1000)
                    for stage in ("graph_ms", "topic_ms"):
                        if stage in result.meta["timings"]:
                            stages[spec].setdefault(stage, []).append(result.meta["timings"][stage])
    load.append(os.getloadavg()[0])
    for mem in clients.values():
        mem.close()
    first = args.variants[0]
    print(
        f"{args.owner}: {len(asked)} recalls per variant,"
        f" load average {load[0]:.1f} -> {load[1]:.1f}"
    )
    for spec in args.variants:
        p50, p95 = _pct(times[spec], 0.5), _pct(times[spec], 0.95)
        r50, r95 = p50 / _pct(times[first], 0.5), p95 / _pct(times[first], 0.95)
        own = ", ".join(f"{s} p95 {_pct(v, 0.95):.1f}" for s, v in stages[spec].items())
        print(
            f"{spec}: p50 {p50:.1f} ms, p95 {p95:.1f} ms;"
            f" /{first} p50 {r50:.2f}, p95 {r95:.2f}; {own}"
        )


if __name__ == "__main__":
    main()
