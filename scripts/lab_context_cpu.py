"""Lab: what one ``recall_context`` (3 scopes + knowledge) costs against one single-scope recall
at the same store, in process CPU (every thread) and wall clock, in one run (issue 25).

On a loaded machine a run's wall-clock ratio follows how much CPU the process gets; the CPU
ratio moves little with load, so two code trees compare in interleaved runs of this script,
each tree on the import path in turn (the store is written once, by the first run):

    for tree in OLD NEW NEW OLD OLD NEW; do
        PYTHONPATH=$tree/src nice -n 10 .venv/bin/python scripts/lab_context_cpu.py \\
            --data ../shared/data/locomo/locomo10.json --db /tmp/context-lab.db
    done

LoCoMo conversation 1 split as `quipu bench knowledge` splits it; 10 warm-up questions, then
each question asked once each way, alternating which goes first, each with a suffix so no
query vector is remembered from an earlier call. ``--session``: every merged call passes one
session id, so the durable shown set (``knowledge_shown``) is read and written on each call as
an agent's turns do. Prints the load average before and after. docs/knowledge.md quotes its
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path

import numpy as np

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.evals import knowledge_bench
from quipu.evals.datasets import load_locomo
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.recall_context import MergedRecall
from quipu.storage.sqlite.store import SQLiteStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="locomo10.json")
    parser.add_argument("--db", required=True, type=Path, help="the store (written if absent)")
    parser.add_argument(
        "--session",
        action="store_true",
        help="each merged call passes one session_id, as an agent's turns do: the shown set is "
        "read from and written to the store (knowledge_shown) on every call",
    )
    args = parser.parse_args()
    conv = load_locomo(args.data)[0]
    fresh = not args.db.exists()
    store = SQLiteStore(args.db)
    service = MemoryService(store, LocalEmbedder(), Limits())
    knowledge = KnowledgeService(service, near_duplicate=1.01)  # a corpus, not a gate test
    merged = MergedRecall(knowledge)
    agent = Principal(
        "lab", "key-agent", Role.AGENT, agent_id="agent", user_id="user",
        grants=frozenset({"tenant:write"}),
    )  # fmt: skip
    if fresh:
        admin = Principal("lab", "key-admin", Role.ADMIN, agent_id="curator")
        knowledge_bench._ingest(conv, service, knowledge, agent, admin)
    scopes = list(knowledge_bench.SCOPES)
    questions = [q.question for q in conv.scored_questions()]
    for q in questions[:10]:
        merged.recall_context(agent, q, scopes=scopes, k=10, budget_tokens=100_000)
        service.recall(agent, q, scope="agent", k=10)
    run = uuid.uuid4().hex[:6]
    session = f"lab-{run}" if args.session else None
    load_before = os.getloadavg()
    cpu: dict[str, list[float]] = {"merged": [], "single": []}
    wall: dict[str, list[float]] = {"merged": [], "single": []}
    for at, q in enumerate(questions[10:]):
        for name in ("single", "merged") if at % 2 else ("merged", "single"):
            c, w = time.process_time(), time.perf_counter()
            if name == "merged":
                merged.recall_context(
                    agent,
                    f"{q} {run}",
                    scopes=scopes,
                    k=10,
                    budget_tokens=100_000,
                    session_id=session,
                )
            else:
                service.recall(agent, f"{q} {run}!", scope="agent", k=10)
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)

    def ratio(p: int) -> float:
        return round(float(np.percentile(wall["merged"], p) / np.percentile(wall["single"], p)), 2)

    print(
        json.dumps(
            {
                "questions": len(cpu["merged"]),
                "cpu_ms_mean": {k: round(1000 * float(np.mean(v)), 2) for k, v in cpu.items()},
                "cpu_ratio_mean": round(float(np.mean(cpu["merged"]) / np.mean(cpu["single"])), 2),
                "wall_ratio": {"p50": ratio(50), "p95": ratio(95)},
                "wall_ms": {
                    k: {
                        p: round(1000 * float(np.percentile(v, int(p[1:]))), 1)
                        for p in ("p50", "p95")
                    }
                    for k, v in wall.items()
                },
                "session": session is not None,
                "load_average": {"before": load_before, "after": os.getloadavg()},
            }
        )
    )
    merged.close()
    service.close()
    store.close()


if __name__ == "__main__":
    main()
