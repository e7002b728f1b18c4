#!/usr/bin/env python3
"""Store-level benchmark, SQLite vs PostgreSQL (issue 4), printed as JSON.

    python scripts/bench_store.py --database sqlite:/tmp/b.db --rows 100000
    python scripts/bench_store.py --database postgresql://… --rows 100000

Measures, on one machine and run: bulk load (import_versions), vector_candidates and
text_candidates latency in one scope of ``--rows`` rows (store level: no embedding, no fusion),
recall@10 of the vector path against exact numpy, ingest rate of ``insert`` one memory at a time
with pre-computed vectors, and on-disk bytes per memory. Vectors are synthetic but shaped like
sentence embeddings (a 24-d latent space mapped to 384-d plus noise, unit length); queries are
fresh samples of the same distribution. On PostgreSQL the run uses a new schema, dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from quipu.core.query import Filters
from quipu.core.records import (
    MemoryVersion,
    Scope,
    ScopeRef,
)
from quipu.core.text import embedding_key
from quipu.evals.perf import _PEOPLE, _THINGS, imported_fact, percentiles, sentence
from quipu.storage.base import EmbeddingPin

DIM = 384
PIN = EmbeddingPin("bench-latent-384", DIM)


class Latent:
    """Unit vectors with low intrinsic dimension, like real sentence embeddings."""

    def __init__(self, seed: int, latent: int = 24, noise: float = 0.15) -> None:
        rng = np.random.default_rng(seed)
        self.w = rng.standard_normal((latent, DIM)).astype(np.float32)
        self.rng = rng
        self.noise = noise

    def sample(self, n: int) -> np.ndarray:
        z = self.rng.standard_normal((n, self.w.shape[0])).astype(np.float32)
        x = z @ self.w + self.noise * np.sqrt(self.w.shape[0]) * self.rng.standard_normal(
            (n, DIM)
        ).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def version(tenant: str, owner: str, text: str, at: datetime) -> MemoryVersion:
    return imported_fact(tenant, owner, text, at=at, model=PIN.model_id)


def open_store(database: str, plan_args: dict[str, Any]) -> tuple[Any, Any]:
    """(store, cleanup) for ``sqlite:PATH`` or a PostgreSQL URL (a fresh schema in it)."""
    if database.startswith("sqlite:"):
        from quipu.storage.sqlite.store import SQLiteStore

        path = Path(database.removeprefix("sqlite:"))
        for p in path.parent.glob(path.name + "*"):
            p.unlink()
        return SQLiteStore(path), lambda: None
    import psycopg
    from psycopg.conninfo import make_conninfo

    from quipu.storage.postgres.search import SearchPlan
    from quipu.storage.postgres.store import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        conn.execute(f"CREATE SCHEMA {schema}")
    url = make_conninfo(database, options=f"-c search_path={schema},public")
    store = PostgresStore(url, search_plan=SearchPlan(**plan_args))

    def cleanup() -> None:
        store.close()
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    return store, cleanup


def disk_bytes(store: Any, database: str) -> int:
    if database.startswith("sqlite:"):
        path = Path(database.removeprefix("sqlite:"))
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    with store._conn() as conn:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
            " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'm')"
        ).fetchone()
    return int(row[0])


def run(args: argparse.Namespace) -> dict[str, Any]:
    plan = {"exact_limit": args.exact_limit} if args.exact_limit else {}
    store, cleanup = open_store(args.database, plan)
    out: dict[str, Any] = {
        "database": "sqlite" if args.database.startswith("sqlite:") else "postgres"
    }
    try:
        store.pin_embedding(PIN)
        rng = random.Random(7)
        latent = Latent(11)
        now = datetime.now(UTC)
        owners = ["needle"] + [f"other-{i}" for i in range(args.others)]
        per_other = args.other_rows
        vectors = latent.sample(args.rows)
        texts = [sentence(rng) for _ in range(args.rows)]
        items = [
            (version("t1", "needle", texts[i], now - timedelta(seconds=args.rows - i)), vectors[i])
            for i in range(args.rows)
        ]
        for o in owners[1:]:
            vs = latent.sample(per_other)
            items += [(version("t1", o, sentence(rng), now), vs[j]) for j in range(per_other)]
        mark = time.perf_counter()
        store.import_versions(items)
        load_s = time.perf_counter() - mark
        out["load"] = {"rows": len(items), "seconds": round(load_s, 1),
                       "rows_per_s": round(len(items) / load_s)}  # fmt: skip
        if hasattr(store, "ensure_ann_indexes"):
            mark = time.perf_counter()
            built = store.ensure_ann_indexes()
            out["ann_index"] = {
                "built": len(built),
                "seconds": round(time.perf_counter() - mark, 1),
            }
            with store._conn() as conn:
                conn.execute("VACUUM ANALYZE memory_versions")
        size = disk_bytes(store, args.database)
        out["disk"] = {"bytes": size, "bytes_per_memory": round(size / len(items))}

        ref = ScopeRef("t1", Scope.AGENT, "needle")
        queries = latent.sample(args.queries)
        exact = np.argsort(-(vectors @ queries.T), axis=0)[:10].T
        for q in queries[:10]:  # warm-up
            store.vector_candidates(ref, q, Filters(), 60)
        lat, recall, paths = [], [], set()
        for q, truth in zip(queries, exact, strict=True):
            t = time.perf_counter()
            found, info = store.vector_candidates(ref, q, Filters(), 60)
            lat.append((time.perf_counter() - t) * 1000)
            paths.add(info.path)
            got = {m.id for m in store.load([c.key for c in found[:10]]).values()}
            recall.append(len(got & {items[int(r)][0].id for r in truth}) / 10)
        out["vector"] = {
            "scope_rows": args.rows,
            "limit": 60,
            "latency_ms": percentiles(lat),
            "recall_at_10": round(float(np.mean(recall)), 4),
            "paths": sorted(paths),
        }
        for label, make in (
            ("text_common_terms", lambda i: f"what does {rng.choice(_PEOPLE)} think about"
             f" {rng.choice(_THINGS)}"),
            ("text_with_rare_term", lambda i: f"what about {texts[i][-30:]}"),
        ):  # fmt: skip
            lat, paths = [], set()
            for i in range(args.queries):
                qtext = make(i)
                t = time.perf_counter()
                _, info = store.text_candidates(ref, qtext, Filters(), 60)
                lat.append((time.perf_counter() - t) * 1000)
                paths.add(info.path)
            out[label] = {"latency_ms": percentiles(lat), "paths": sorted(paths)}

        for threads in sorted({1, args.threads}):
            out[f"ingest_{threads}_thread{'s' * (threads > 1)}"] = ingest(
                store, latent, rng, args.ingest, threads
            )
    finally:
        cleanup()
    return out


def ingest(store: Any, latent: Latent, rng: random.Random, n: int, threads: int) -> dict[str, Any]:
    """``insert`` one memory at a time with pre-computed vectors, ``threads`` writers at once
    (each its own scope owner, as concurrent agents are)."""
    vectors = latent.sample(n)
    texts = [f"{sentence(rng)} [{i}]" for i in range(n)]
    tag = uuid.uuid4().hex[:6]

    def write(part: int) -> None:
        ref = ScopeRef("t1", Scope.AGENT, f"ingest-{tag}-{part}")
        for i in range(part, n, threads):
            memory = version("t1", ref.owner, texts[i], datetime.now(UTC))
            store.insert(ref, memory, vectors[i], embedding_key(texts[i]), 10**9)

    mark = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, range(threads)))
    seconds = time.perf_counter() - mark
    return {"memories": n, "threads": threads, "seconds": round(seconds, 2),
            "memories_per_s": round(n / seconds)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="sqlite:PATH or a postgresql:// URL")
    parser.add_argument("--rows", type=int, default=100_000, help="rows in the measured scope")
    parser.add_argument("--others", type=int, default=0, help="other scope owners")
    parser.add_argument("--other-rows", type=int, default=1000, help="rows per other owner")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=5000, help="memories inserted one by one")
    parser.add_argument("--threads", type=int, default=4, help="concurrent ingest writers")
    parser.add_argument("--exact-limit", type=int, default=0, help="PostgreSQL SearchPlan")
    args = parser.parse_args()
    result = run(args)
    result["machine"] = {"cpus": os.cpu_count()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
