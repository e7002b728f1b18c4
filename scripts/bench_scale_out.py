#!/usr/bin/env python3
"""Many tenants on one PostgreSQL against a Citus cluster, in one run (issue 30), as JSON.

    python scripts/bench_scale_out.py --postgres postgresql://… --citus postgresql://…coordinator…
    (--postgres may be repeated: several single servers, e.g. one of the cluster's major version)

For each database, in a fresh schema (on Citus migrated by ``quipu migrate --citus``):

* **ingest**: ``--tenants`` times ``--per-tenant`` memories written one ``insert`` at a time (the
  store call ``remember`` makes once the text is screened and embedded) by ``--writers``
  threads, each taking its own tenants in turn, with vectors computed beforehand. Memories per
  second, and each insert's latency.
* **recall**: ``--queries`` recalls (after ``--warmup`` untimed ones) through the service, each
  for a random tenant, embedding the question with the bundled model on every call; then the
  same with ``--clients`` threads at once. Latency percentiles and recalls per second.

The texts and vectors are the same for both databases (quipu.evals.perf: generated sentences;
their vectors are the model's embeddings of ~10k distinct sentence stems plus a little noise,
so neighbourhoods are real). The load average is read before and after every phase: all nodes
share this machine's cores, so a busy machine moves every figure. Results in
docs/benchmarks.md ("Scale-out on Citus").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import psycopg

from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.core.text import embedding_key
from quipu.embeddings.local import LocalEmbedder
from quipu.evals.perf import (
    _PEOPLE,
    _THINGS,
    SentenceVectors,
    imported_fact,
    percentiles,
    sentence,
)
from quipu.core.limits import Limits
from quipu.memories import MemoryService
from quipu.storage.postgres.store import PostgresStore


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def fresh_schema(database: str, *, citus: bool) -> tuple[str, str]:
    """(schema, its URL): a new schema; on Citus migrated with the CLI as an operator does."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{database}{'&' if '?' in database else '?'}options=" + quote(
        f"-c search_path={schema},public"
    )
    if citus:
        quipu = Path(sys.executable).with_name("quipu")
        done = subprocess.run(
            [str(quipu), "migrate", "--citus", "--db", url],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"quipu migrate --citus failed:\n{done.stderr}")
    return schema, url


def drop(database: str, schema: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def principal(tenant: str) -> Principal:
    return Principal(tenant, f"key-{tenant}", Role.AGENT, agent_id="agent", user_id="user")


def ingest(
    store: PostgresStore, texts: list[list[str]], vectors: np.ndarray, model: str, writers: int
) -> dict[str, Any]:
    tenants, per = len(texts), len(texts[0])
    now = datetime.now(UTC)
    latencies: list[float] = []
    lock = threading.Lock()

    def write(part: int) -> None:
        mine = list(range(part, tenants, writers))
        spent: list[float] = []
        for i in range(per):
            for t in mine:
                tenant = f"tenant-{t:03d}"
                ref = ScopeRef(tenant, Scope.AGENT, "agent")
                text = texts[t][i]
                memory = imported_fact(
                    tenant, "agent", text, at=now - timedelta(seconds=per - i), model=model
                )
                mark = time.perf_counter()
                store.insert(ref, memory, vectors[t * per + i], embedding_key(text), 10**6)
                spent.append((time.perf_counter() - mark) * 1000)
        with lock:
            latencies.extend(spent)

    load_before = load_average()
    mark = time.perf_counter()
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    seconds = time.perf_counter() - mark
    return {
        "memories": tenants * per,
        "writers": writers,
        "seconds": round(seconds, 1),
        "memories_per_s": round(tenants * per / seconds, 1),
        "insert_latency_ms": percentiles(latencies),
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def recall(svc: MemoryService, tenants: int, queries: int, warmup: int, clients: int) -> Any:
    rng = random.Random(5)
    asks = [
        (f"tenant-{rng.randrange(tenants):03d}",
         f"what does {rng.choice(_PEOPLE)} think about {rng.choice(_THINGS)}?")
        for _ in range(queries)
    ]  # fmt: skip
    for tenant, q in asks[:warmup]:
        svc.recall(principal(tenant), q, k=10)

    def timed(ask: tuple[str, str]) -> tuple[float, dict[str, float], str]:
        mark = time.perf_counter()
        result = svc.recall(principal(ask[0]), ask[1], k=10)
        ms = (time.perf_counter() - mark) * 1000
        return ms, result.meta["timings"], result.meta["paths"].get("semantic", "none")

    out: dict[str, Any] = {"queries": queries, "warmup": warmup, "k": 10}
    load_before = load_average()
    serial = [timed(a) for a in asks]
    stages: dict[str, list[float]] = {}
    for _, timings, _ in serial:
        for stage, ms in timings.items():
            stages.setdefault(stage, []).append(ms)
    out["one_client"] = {
        "latency_ms": percentiles([ms for ms, _, _ in serial]),
        "stage_p50_ms": {s: percentiles(v)["p50"] for s, v in sorted(stages.items())},
        "vector_paths": sorted({p for _, _, p in serial}),
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    load_before = load_average()
    mark = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        parallel = list(pool.map(timed, asks))
    seconds = time.perf_counter() - mark
    out[f"{clients}_clients"] = {
        "latency_ms": percentiles([ms for ms, _, _ in parallel]),
        "recalls_per_s": round(len(asks) / seconds, 1),
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    return out


def run_one(
    label: str,
    database: str,
    citus: bool,
    args: argparse.Namespace,
    embedder: LocalEmbedder,
    texts: list[list[str]],
    vectors: np.ndarray,
) -> dict[str, Any]:
    print(f"{label}: fresh schema", file=sys.stderr)
    schema, url = fresh_schema(database, citus=citus)
    store = PostgresStore(url, max_connections=args.writers + args.clients + 2)
    try:
        svc = MemoryService(store, embedder, Limits(quota_per_owner=10**6))
        with psycopg.connect(url) as conn:
            server = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
            workers = (
                int(conn.execute("SELECT count(*) FROM citus_get_active_worker_nodes()")
                    .fetchone()[0])  # type: ignore[index]
                if citus else 0
            )  # fmt: skip
        print(f"{label}: ingest {len(texts)} x {len(texts[0])}", file=sys.stderr)
        written = ingest(store, texts, vectors, embedder.model_id, args.writers)
        print(f"{label}: recall", file=sys.stderr)
        asked = recall(svc, len(texts), args.queries, args.warmup, args.clients)
        return {
            "database": label,
            "server_version": server,
            "distributed": store.distributed,
            "worker_nodes": workers,
            "ingest": written,
            "recall": asked,
            "storage_bytes": store.storage_bytes(),
        }
    finally:
        store.close()
        drop(database, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--postgres",
        action="append",
        default=[],
        help="a single PostgreSQL server's URL (repeat to compare several, e.g. the same major"
        " version as the cluster's nodes)",
    )
    parser.add_argument("--citus", help="a Citus coordinator's URL")
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--per-tenant", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4, help="concurrent ingest threads")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--clients", type=int, default=4, help="concurrent recall threads")
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args()
    targets = [("postgres", url, False) for url in args.postgres]
    targets += [("citus", args.citus, True)] if args.citus else []
    if not targets:
        parser.error("give --postgres, --citus or both")
    embedder = LocalEmbedder()
    rng = random.Random(30)
    texts = [[sentence(rng) for _ in range(args.per_tenant)] for _ in range(args.tenants)]
    print("embedding the sentence stems", file=sys.stderr)
    mark = time.perf_counter()
    vectors = SentenceVectors(embedder, seed=30)([t for tenant in texts for t in tenant])
    result: dict[str, Any] = {
        "benchmark": "scale_out",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": load_average()},
        "tenants": args.tenants,
        "per_tenant": args.per_tenant,
        "vectors_seconds": round(time.perf_counter() - mark, 1),
        "runs": [
            run_one(label, url, citus, args, embedder, texts, vectors)
            for label, url, citus in targets
        ],
    }
    result["machine"]["load_average_at_end"] = load_average()
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
