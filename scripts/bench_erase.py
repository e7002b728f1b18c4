#!/usr/bin/env python3
"""Subject erasure benchmark (issue 22, LIFE-4), printed as JSON.

    python scripts/bench_erase.py --database sqlite:/tmp/e.db
    python scripts/bench_erase.py --database postgresql://…

Loads one end user with ``--memories`` memories (half in its ``user`` scope, half in
``agent_user`` scopes of two agents, a quarter of them revised once, every version with a
384-d vector) and ``--turns`` session turns over 10 sessions, beside ``--others`` other users
with as many memories each; then times the subject erasure job end to end (enqueue, every
batch, the final audit) through the governance use cases, and ``reclaim`` (the vacuum that
takes the freed row images off the disk) separately. Reports the counts per table and the load
average before and after. On PostgreSQL the run uses a new schema, dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import PIN, Latent, open_store

from quipu.composition import build_runtime, load_settings
from quipu.core.auth import version_audit
from quipu.core.limits import Limits
from quipu.core.records import Principal, Relation, Role, Scope
from quipu.core.sessions import SessionBounds, SessionKey
from quipu.core.text import content_hash
from quipu.evals.perf import imported_fact, sentence
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.memories import MemoryService

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
AGENTS = ("planner", "writer")


def _rows(user: str, n: int, rng: random.Random, latent: Latent, now: datetime) -> list[Any]:
    """``n`` families of ``user`` (user and agent_user scopes), a quarter with a second version."""
    vectors = latent.sample(n + n // 4)
    items: list[Any] = []
    for i in range(n):
        if i % 2 == 0:
            scope, owner = Scope.USER, user
        else:
            scope, owner = Scope.AGENT_USER, f"{AGENTS[i % 4 // 2]}\x1f{user}"
        text = sentence(rng)
        first = replace(
            imported_fact("t1", owner, text, at=now - timedelta(days=2), model=PIN.model_id),
            scope=scope,
            tags=("bench",),
            metadata={"n": i},
        )
        if i % 4 != 3:
            items.append((first, vectors[i]))
            continue
        revised_text = sentence(rng)
        items.append((replace(first, is_current=False), vectors[i]))
        second = replace(
            first,
            version=2,
            text=revised_text,
            content_hash=content_hash(revised_text),
            relation=Relation.REVISES,
            reason=f"corrected after call {i}",
            recorded_at=now - timedelta(days=1),
            valid_at=now - timedelta(days=1),
        )
        items.append((second, vectors[n + i // 4]))
    return items


def run(args: argparse.Namespace) -> dict[str, Any]:
    store, cleanup = open_store(args.database, {})
    backend = "sqlite" if args.database.startswith("sqlite:") else "postgres"
    out: dict[str, Any] = {"database": backend, "machine": {"cpus": os.cpu_count()}}
    try:
        store.pin_embedding(PIN)
        rng, latent, now = random.Random(7), Latent(11), datetime.now(UTC)
        items = _rows("u-bench", args.memories, rng, latent, now)
        for k in range(args.others):
            items += _rows(f"u-other-{k}", args.memories, rng, latent, now)
        mark = time.perf_counter()
        store.import_versions(items)
        for memory, _ in items:  # the audit lines a revise writes, with its reason
            if memory.version == 2:
                store.record_audit(version_audit(memory))
        bounds = SessionBounds(max_turns=100_000, max_owner_bytes=10**9)
        writer = Principal("t1", "key-planner", Role.AGENT, agent_id="planner", user_id="u-bench")
        for t in range(args.turns):
            key = SessionKey("t1", "planner\x1fu-bench", f"s{t % 10}")
            text = f"turn {t}: {sentence(rng)}"
            store.append_turn(key, writer, "user", text, {}, now, now + timedelta(days=7), bounds)
        out["load_seconds"] = round(time.perf_counter() - mark, 1)
        out["loaded"] = {"versions": len(items), "turns": args.turns}
        service = MemoryService(store, None, Limits())
        settings = load_settings({"database": "unused.db"}, environ={})
        rt = build_runtime(settings, service, extractor=DeterministicExtractor())
        out["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        mark = time.perf_counter()
        job, _ = rt.governance.erase_subject(ADMIN, "u-bench", reason="bench: art. 17 request")
        rt.worker.drain()
        erase_s = time.perf_counter() - mark
        done = rt.governance.erasure_job(ADMIN, job.job_id)
        assert done.status.value == "succeeded", done.last_error
        out["erase_subject"] = {
            "seconds": round(erase_s, 2),
            "families": done.result["families"],
            "counts": done.result["counts"],
        }
        mark = time.perf_counter()
        reclaimed = store.reclaim()
        out["reclaim"] = {"seconds": round(time.perf_counter() - mark, 2), **reclaimed}
        out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        left = rt.governance.subjects(replace(ADMIN, role=Role.SUPERADMIN), limit=200)[0]
        out["subjects_left"] = sum(1 for s in left if s.live and "u-bench" in s.owner)
        rt.worker.stop()
        service.close()
    finally:
        cleanup()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--database", required=True, help="sqlite:PATH or a postgresql:// URL")
    parser.add_argument("--memories", type=int, default=10_000, help="families of the subject")
    parser.add_argument("--turns", type=int, default=1_000, help="session turns of the subject")
    parser.add_argument("--others", type=int, default=1, help="other users, as many memories")
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
