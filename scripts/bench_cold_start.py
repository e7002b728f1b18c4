"""Cold start and memory per process on one scope of a built store (issue 23, finding 3),
before and after, in interleaved rounds.

Each round starts, in turn, a fresh library process (``import quipu``, open, first recall)
and a fresh ``quipu serve`` (default workers; seconds until the first HTTP recall answers),
once with the code under test and once with ``--before SRC`` (another checkout's ``src``
folder, put first on ``PYTHONPATH``), so both arms see the same load. After the first HTTP
recall the server answers ``--recalls`` more (so every worker has searched the scope), then
the RSS and PSS of every server process are read from ``/proc`` (PSS splits a page shared by
several processes between them: the mapped scope index counts once across workers).

    python scripts/bench_cold_start.py --db scale.db --owner scale-100000 \\
        --before /tmp/base/src --rounds 3 --out cold.json

``--first`` also times one start of each kind after deleting the scope's index file and the
kept model (what the first process after a deploy pays). Build the store with
``quipu bench scale --db scale.db --size 100000 --no-cold --ingest 0``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from quipu.evals.http_load import cpu_seconds, free_port

QUESTION = "What did Caroline research?"
LIBRARY = """
import sys, time
mark = time.perf_counter()
import quipu
imported = time.perf_counter() - mark
mem = quipu.open(sys.argv[1], worker_embedded=False, local_agent_id=sys.argv[2])
mem.recall(sys.argv[3], scope="agent", k=10)
first = time.perf_counter() - mark
store = mem.service.store
print(round(imported, 3), round(first, 3), getattr(store, "mapped", -1), store.rebuilds)
"""
#: Memory the scope itself takes in one process: a recall in a small scope first (model, code),
#: then one in the measured scope; the difference in RSS and in private (unshared) pages.
SCOPE_MEMORY = """
import sys
from dataclasses import replace
from pathlib import Path
import quipu

def pages():
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
            out[name] = int(rest.split()[0]) / 1024
    return out["Rss"], out["Private_Clean"] + out["Private_Dirty"]

mem = quipu.open(sys.argv[1], worker_embedded=False, local_agent_id=sys.argv[3])
mem.recall(sys.argv[4], scope="agent", k=10)
rss0, private0 = pages()
big = replace(mem.principal, agent_id=sys.argv[2])
for q in (sys.argv[4], "hiking", "what did Melanie paint?", "when is the charity race?"):
    mem.service.recall(big, q, scope="agent", k=10)
rss1, private1 = pages()
print(round(rss1 - rss0, 1), round(private1 - private0, 1), round(rss1, 1))
"""


def memory_of(pid: int) -> dict[str, float]:
    """RSS and PSS of one process in MiB (``/proc/PID/smaps_rollup``)."""
    out = {"rss_mib": 0.0, "pss_mib": 0.0}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss"):
            out[f"{name.lower()}_mib"] = round(int(rest.split()[0]) / 1024, 1)
    return out


def _env(before: Path | None) -> dict[str, str]:
    env = {**os.environ, "QUIPU_LOG_LEVEL": "warning", "QUIPU_WORKER_EMBEDDED": "false"}
    env.pop("PYTHONPATH", None)
    if before is not None:
        env["PYTHONPATH"] = str(before)
    return env


def library(db: str, owner: str, before: Path | None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY, db, owner, QUESTION],
        capture_output=True,
        text=True,
        check=False,
        env=_env(before),
        timeout=900,
    )
    fields = done.stdout.split()
    if len(fields) != 4:
        raise RuntimeError(f"library start failed ({done.returncode}): {done.stderr[-3000:]}")
    imported, first, mapped, rebuilds = fields
    return {
        "import_s": float(imported),
        "first_recall_s": float(first),
        "mapped": int(mapped),
        "rebuilds": int(rebuilds),
        "exit_code": done.returncode,  # measured before exit; a crash at exit is kept visible
    }


def scope_memory(db: str, owner: str, small: str, before: Path | None) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", SCOPE_MEMORY, db, owner, small, QUESTION],
        capture_output=True,
        text=True,
        check=True,
        env=_env(before),
        timeout=900,
    )
    rss, private, total = (float(x) for x in done.stdout.split())
    return {"scope_rss_mib": rss, "scope_private_mib": private, "process_rss_mib": total}


def serve(db: str, owner: str, before: Path | None, recalls: int, log: Path) -> dict[str, Any]:
    port = free_port()
    env = {**_env(before), "QUIPU_LOCAL_AGENT_ID": owner}
    url = f"http://127.0.0.1:{port}/v1/recall"
    mark = time.perf_counter()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "quipu", "serve", "--db", db, "--port", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        first, cpu = None, 0.0
        while first is None and time.perf_counter() - mark < 900:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited early; see {log}")
            try:
                if httpx.post(url, json={"query": QUESTION, "k": 10}, timeout=120).is_success:
                    first = time.perf_counter() - mark
                    # CPU the server's processes spent until then: steadier than wall time
                    # on a shared machine (a start waits for cores the other sessions hold)
                    cpu = cpu_seconds(proc.pid)
            except httpx.HTTPError:
                time.sleep(0.05)
        with httpx.Client(timeout=120) as client:  # new connections: every worker gets some
            for i in range(recalls):
                client.post(
                    url, json={"query": f"{QUESTION} {i}", "k": 10}, headers={"Connection": "close"}
                )
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        each = [memory_of(int(p)) for p in [proc.pid, *children]]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {
        "first_http_recall_s": None if first is None else round(first, 3),
        "cpu_s_to_first_recall": None if first is None else round(cpu, 2),
        "processes": each,
        "rss_mib_total": round(sum(p["rss_mib"] for p in each), 1),
        "pss_mib_total": round(sum(p["pss_mib"] for p in each), 1),
    }


def _forget_files(db: str) -> None:
    folder = Path(db + "-index")
    if folder.exists():
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--owner", default="scale-100000")
    parser.add_argument("--before", type=Path, help="src folder of the code to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recalls", type=int, default=20)
    parser.add_argument("--first", action="store_true")
    parser.add_argument("--small", help="a small scope's owner: also measure the scope's memory")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    arms: list[tuple[str, Path | None]] = [("after", None)]
    if args.before is not None:
        arms.insert(0, ("before", args.before))
    log = Path(args.db + ".serve.log")
    out: dict[str, Any] = {"load_average_at_start": os.getloadavg(), "rounds": []}
    if args.first:
        _forget_files(args.db)
        out["after_first_library"] = library(args.db, args.owner, None)
        print(json.dumps({"after_first_library": out["after_first_library"]}), flush=True)
        _forget_files(args.db)
        out["after_first_serve"] = serve(args.db, args.owner, None, args.recalls, log)
        print(json.dumps({"after_first_serve": out["after_first_serve"]}), flush=True)
    library(args.db, args.owner, None)  # the files exist before the measured rounds
    for _ in range(args.rounds):
        row: dict[str, Any] = {"load_average": os.getloadavg()}
        for name, src in arms:
            row[f"{name}_library"] = library(args.db, args.owner, src)
        for name, src in arms if args.small else []:
            row[f"{name}_scope_memory"] = scope_memory(args.db, args.owner, args.small, src)
        for name, src in arms:
            row[f"{name}_serve"] = serve(args.db, args.owner, src, args.recalls, log)
        out["rounds"].append(row)
        print(json.dumps(row), flush=True)
    summary: dict[str, Any] = {}
    for name, _ in arms:
        lib = [r[f"{name}_library"]["first_recall_s"] for r in out["rounds"]]
        srv = [r[f"{name}_serve"]["first_http_recall_s"] for r in out["rounds"]]
        summary[name] = {
            "library_first_recall_s_median": statistics.median(lib),
            "serve_first_http_recall_s_median": statistics.median(srv),
        }
    if args.before is not None:
        for kind in ("library_first_recall_s_median", "serve_first_http_recall_s_median"):
            summary[f"ratio_{kind}"] = round(summary["after"][kind] / summary["before"][kind], 3)
    out["summary"] = summary
    out["load_average_at_end"] = os.getloadavg()
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
