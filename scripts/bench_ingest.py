"""Ingest at defaults, interleaved (issue 23): real LoCoMo turns through ``remember`` one at a
time and through ``remember_many`` (100 a call), each round in fresh processes, optionally
beside another checkout's ``remember`` (``--base-src``: e.g. ``git archive <commit> src | tar
-x -C /tmp/base``). Prints turns/s, the process's CPU ms per turn and the load average.

    python scripts/bench_ingest.py [--db postgresql://...] [--turns 200] [--rounds 3] \
        [--base-src /tmp/base/src]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

DATA = Path("/work/shared/data/locomo/locomo10.json")


def measure(target: str, turns: int, mode: str, data: Path) -> None:
    """One measurement in this process (run by the parent in a fresh one)."""
    from quipu.embedded import open as open_store
    from quipu.evals.datasets import load_locomo

    texts = [t.text for c in load_locomo(data) for t in c.turns]
    mem = open_store(target or str(Path(tempfile.mkdtemp()) / "ingest.db"), worker_embedded=False)
    service, tag = mem.service, time.time_ns()
    warm = replace(mem.principal, agent_id=f"warm-{tag}")
    for text in texts[-10:]:  # the model and the store's statements, before the clock starts
        service.remember(warm, f"{text} {tag}", scope="agent")
    who = replace(mem.principal, agent_id=f"{mode}-{tag}")
    batch = [f"{t} [{tag}]" for t in texts[:turns]]
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "remember":
        for text in batch:
            service.remember(who, text, scope="agent")
    else:
        from quipu.memory_batch import remember_many

        for start in range(0, len(batch), 100):
            for out in remember_many(service, who, batch[start : start + 100], scope="agent"):
                assert not isinstance(out, Exception), out
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    backend = service.store.capabilities.backend
    print(
        f"{backend} {mode}: {turns / wall:.1f} turns/s, cpu {cpu / turns * 1000:.2f} ms/turn, "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    mem.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default="", help="a PostgreSQL URL (default: a fresh SQLite file)")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-src", default=None, help="another checkout's src, for its remember")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        measure(args.db, args.turns, args.one, args.data)
        return
    here = str(Path(__file__).resolve().parent.parent / "src")
    runs = [("branch", here, "remember"), ("branch", here, "remember_many")]
    if args.base_src:
        runs.insert(0, ("base", args.base_src, "remember"))
    print("uptime:", os.getloadavg(), flush=True)
    for _ in range(args.rounds):
        for label, src, mode in runs:
            print(f"{label:6} ", end="", flush=True)
            command = [sys.executable, __file__, "--one", mode, "--turns", str(args.turns)]
            command += ["--db", args.db, "--data", str(args.data)]
            subprocess.run(command, env={**os.environ, "PYTHONPATH": src}, check=True)
    print("uptime:", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
