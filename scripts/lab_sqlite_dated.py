"""Dated and undated recall on a `quipu bench scale` store, paired before/after (issue 23).

Recalls every benchmark question (the LoCoMo questions naming a date, and a seeded sample of
100 others, as `quipu bench scale` picks them) in the scopes ``scale-<size>`` of a store the
bench built, and writes each question's page (ids and scores) with p50/p95 latency and stage
figures. Run it once with the code before a change on ``PYTHONPATH`` and once after, rounds
interleaved, then ``--pair`` the two files: how many pages are the same ids in the same order
(and the same scores), per scope and question kind.

    git archive bd75b37 src | tar -x -C /tmp/before
    for r in 1 2 3; do
      PYTHONPATH=/tmp/before/src nice -n 10 .venv/bin/python scripts/lab_sqlite_dated.py \\
          --db COPY.db --out before-$r.json
      nice -n 10 .venv/bin/python scripts/lab_sqlite_dated.py --db COPY.db --out after-$r.json
    done
    .venv/bin/python scripts/lab_sqlite_dated.py --pair before-1.json after-1.json

Use a copy of the store (its ``-index`` folder too): a recall may rewrite a scope's index file.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any


def measure(db: str, data: Path, sizes: list[int]) -> dict[str, Any]:
    import quipu
    from quipu.evals import scale
    from quipu.evals.perf import percentiles

    mem = scale.quipu_open(db)
    dated, others = scale.questions(data, 100)
    out: dict[str, Any] = {"code": quipu.__file__, "load_start": os.getloadavg(), "scopes": {}}
    for n in sizes:
        principal = scale._principal(mem, f"scale-{n}")
        for q in (dated + others)[:10]:  # warm-up
            mem.service.recall(principal, q, scope="agent", k=10)
        row: dict[str, Any] = {}
        for label, asked in (("dated", dated), ("undated", others)):
            latencies: list[float] = []
            cpu: list[float] = []  # the process's CPU per recall: steadier than time at load
            stages: dict[str, list[float]] = {}
            pages: dict[str, list[list[Any]]] = {}
            for q in asked:
                mark, used = time.perf_counter(), time.process_time()
                result = mem.service.recall(principal, q, scope="agent", k=10)
                latencies.append((time.perf_counter() - mark) * 1000)
                cpu.append((time.process_time() - used) * 1000)
                pages[q] = [[h.memory.id, h.score] for h in result.results]
                for stage, ms in result.meta["timings"].items():
                    stages.setdefault(stage, []).append(ms)
            row[label] = {
                "latency_ms": percentiles(latencies),
                "cpu_ms": percentiles(cpu),
                "stages_ms": {
                    s: {"p50": percentiles(v)["p50"], "p95": percentiles(v)["p95"]}
                    for s, v in sorted(stages.items())
                },
                "pages": pages,
            }
        out["scopes"][str(n)] = row
    out["load_end"] = os.getloadavg()
    mem.close()
    return out


def pair(before: dict[str, Any], after: dict[str, Any]) -> None:
    for n, row in before["scopes"].items():
        for label, runs in row.items():
            a, b = runs["pages"], after["scopes"][n][label]["pages"]
            ids = sum(1 for q in a if [h[0] for h in a[q]] == [h[0] for h in b.get(q, [])])
            same = sum(1 for q in a if a[q] == b.get(q))
            print(f"{n} {label}: same ids and order {ids}/{len(a)}, same scores {same}/{len(a)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", help="a store `quipu bench scale --db` built (a copy)")
    parser.add_argument("--out", type=Path, help="where to write the pages and figures")
    parser.add_argument("--size", type=int, action="append", help="scope sizes (repeatable)")
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/locomo/locomo10.json"))
    parser.add_argument("--pair", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.pair:
        pair(*(json.loads(p.read_text()) for p in args.pair))
        return
    result = measure(args.db, args.data, args.size or [1_000, 10_000, 100_000])
    args.out.write_text(json.dumps(result))
    for n, row in result["scopes"].items():
        for label, runs in row.items():
            lat, cpu = runs["latency_ms"], runs["cpu_ms"]
            print(
                f"{n} {label}: p50 {lat['p50']} p95 {lat['p95']} ms;"
                f" CPU p50 {cpu['p50']} p95 {cpu['p95']} ms"
            )
    print("load", result["load_start"], "->", result["load_end"])


if __name__ == "__main__":
    main()
