"""Promotion cost before/after in one run (issue 24: "≤ 50 ms per session median").

Runs the ``new`` arm of ``quipu eval promotion --locomo`` (episodes plus facts, episodes
embedded afterwards by the ``embed_pending`` job) on the first LoCoMo conversations, once per
source tree per round, the trees taking turns (the order alternates each round), each in a
fresh process, and reports per tree: milliseconds per session (median, p95), the backfill,
any@5 / all@5 after the backfill, and the characters written over the raw turns'. The load
average is read before every run.

    nice -n 10 .venv/bin/python scripts/bench_promotion_cost.py \\
        --tree before=/tmp/quipu-main/src --tree after=src --rounds 3

``--profile FILE`` instead profiles one run of this tree's promotions (cProfile, sessions
only) and prints the top functions by cumulative time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")


def _cost_only(pp: Any, dialogue: Any, embedder: Any, workdir: Path, out: Any) -> None:
    """Append and promote each session (timed), as ``_run_arm("new")`` does, and stop there."""
    from quipu.jobs.worker import Worker
    from quipu.sessions import PROMOTE

    rt = pp._runtime(workdir / "cost.db", embedder, "new")
    try:
        for t in dialogue.turns:
            rt.sessions.append(pp._WHO, t.session_id, t.role, t.text, observed_at=t.at)
        only = Worker(rt.worker.queue, {PROMOTE: rt.worker.handlers[PROMOTE]})
        for sid in dict.fromkeys(t.session_id for t in dialogue.turns):
            started, cpu = time.perf_counter(), time.process_time()
            rt.sessions.promote(pp._WHO, sid)
            only.drain()
            out.session_ms.append(1000 * (time.perf_counter() - started))
            out.written_facts.append({"cpu_ms": 1000 * (time.process_time() - cpu)})
    finally:
        rt.close()


def _child(limit: int, profile: str | None, cost_only: bool = False) -> dict[str, Any]:
    from quipu.embeddings.local import LocalEmbedder
    from quipu.evals import promotion_public as pp

    embedder = LocalEmbedder()
    embedder.embed_batch(["warm up"])
    dialogues = pp._locomo_dialogues(LOCOMO, limit)
    out = pp._ArmResult()
    with tempfile.TemporaryDirectory() as tmp:
        for dialogue in dialogues:
            if profile is None:
                if cost_only:
                    _cost_only(pp, dialogue, embedder, Path(tmp), out)
                else:
                    pp._run_arm("new", dialogue, embedder, Path(tmp), out)
                continue
            import cProfile
            import pstats

            from quipu.jobs.worker import Worker
            from quipu.sessions import PROMOTE

            rt = pp._runtime(Path(tmp) / "p.db", embedder, "new")
            for t in dialogue.turns:
                rt.sessions.append(pp._WHO, t.session_id, t.role, t.text, observed_at=t.at)
            only = Worker(rt.worker.queue, {PROMOTE: rt.worker.handlers[PROMOTE]})
            prof = cProfile.Profile()
            for sid in dict.fromkeys(t.session_id for t in dialogue.turns):
                started = time.perf_counter()
                prof.enable()
                rt.sessions.promote(pp._WHO, sid)
                only.drain()
                prof.disable()
                out.session_ms.append(1000 * (time.perf_counter() - started))
            rt.close()
            prof.dump_stats(profile)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
    hits = list(out.hits.values())
    raw = sum(len(t.text) for d in dialogues for t in d.turns)
    cpu = [f["cpu_ms"] for f in out.written_facts if "cpu_ms" in f]
    return {
        "session_ms": [round(x, 2) for x in out.session_ms],
        "session_cpu_ms": [round(x, 2) for x in cpu],
        "backfill_ms": round(out.backfill_ms, 1),
        "any@5": round(sum(a for a, _ in hits) / len(hits), 3) if hits else None,
        "all@5": round(sum(b for _, b in hits) / len(hits), 3) if hits else None,
        "questions": len(hits),
        "memories": out.memories,
        "episodes": out.episodes,
        "facts": out.facts,
        "storage_over_raw_turns": round(out.chars / raw, 3) if raw else None,
        "pending_after_backfill": out.pending_after_backfill,
    }


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", action="append", default=[], help="name=path/to/src")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=1, help="LoCoMo conversations")
    parser.add_argument("--profile")
    parser.add_argument("--child", action="store_true")
    parser.add_argument(
        "--cost-only",
        action="store_true",
        help="time the promotions only (no embedding backfill, no questions)",
    )
    args = parser.parse_args()
    if args.child or args.profile:
        print(json.dumps(_child(args.limit, args.profile, args.cost_only)))
        return
    trees = dict(t.split("=", 1) for t in args.tree)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            load = os.getloadavg()[0]
            env = {**os.environ, "PYTHONPATH": str(Path(trees[name]).resolve())}
            done = subprocess.run(
                [sys.executable, __file__, "--child", "--limit", str(args.limit)]
                + (["--cost-only"] if args.cost_only else []),
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["load"] = round(load, 2)
            runs[name].append(result)
            ms, cpu = result["session_ms"], result["session_cpu_ms"] or [0.0]
            print(
                f"round {r + 1} {name}: median {statistics.median(ms):.1f} ms"
                f" p95 {_p95(ms):.1f} ms (cpu median {statistics.median(cpu):.1f} ms)"
                f" load {load:.2f}",
                file=sys.stderr,
            )
    summary: dict[str, Any] = {}
    for name, results in runs.items():
        medians = [statistics.median(x["session_ms"]) for x in results]
        p95s = [_p95(x["session_ms"]) for x in results]
        last = results[-1]
        summary[name] = {
            "median_ms_per_round": [round(m, 1) for m in medians],
            "p95_ms_per_round": [round(p, 1) for p in p95s],
            "load_per_round": [x["load"] for x in results],
            "cpu_median_ms_per_round": [
                round(statistics.median(x["session_cpu_ms"]), 1)
                for x in results
                if x["session_cpu_ms"]
            ],
            **{k: last[k] for k in last if k not in ("session_ms", "session_cpu_ms", "load")},
        }
    names = list(trees)
    if len(names) == 2:
        a, b = (runs[n] for n in names)
        summary["ratio_median_per_round"] = [
            round(statistics.median(y["session_ms"]) / statistics.median(x["session_ms"]), 3)
            for x, y in zip(a, b, strict=True)
        ]
        summary["ratio_is"] = f"{names[1]} / {names[0]}"
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
