"""Exact scan against the scope's HNSW walk at one scope size, interleaved (issue 23).

    python scripts/lab_pg_vector_crossover.py postgresql://… scale-10000 [rounds]

For LoCoMo's 100 sampled undated questions, on one connection: ``exact_knn``, ``ann_knn``
(the scope's partial HNSW index is created if missing) and pgvector's bare exact scan of the
scope, the order alternating; p50/p95 of each, and how much of the exact top 10 / top 60 the
walk returned. The store is the one ``quipu bench scale --db`` built (agent scope of ``owner``
in tenant ``local``). Nothing here is part of Quipu.
"""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

import quipu
from quipu.core.query import Filters
from quipu.core.records import Scope, ScopeRef
from quipu.evals.perf import percentiles
from quipu.evals.scale import questions
from quipu.storage.postgres import search

DATA = Path("../shared/data/locomo/locomo10.json")


def main() -> None:
    db, owner = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    ref = ScopeRef("local", Scope.AGENT, owner)
    mem = quipu.open(db, worker_embedded=False)
    pin = mem.service.store.embedding_pin()
    embedder = mem.service.embedder
    assert pin is not None and embedder is not None
    _, others = questions(DATA, 100)
    vectors = [np.asarray(embedder.embed_query(q), dtype=np.float32) for q in others]
    mem.close()
    conn = psycopg.connect(db, autocommit=True)
    register_vector(conn)
    plan = search.SearchPlan()
    conn.execute(search.ann_index_sql(ref, pin, plan))
    times: dict[str, list[float]] = {"exact": [], "ann": [], "floor": []}
    top10, top60 = [], []
    load = [os.getloadavg()]
    for _ in range(rounds):
        for i, v in enumerate(vectors):
            order = ["exact", "ann", "floor"][:: -1 if i % 2 else 1]
            found = {}
            for name in order:
                mark = time.perf_counter()
                if name == "exact":
                    exact = search.exact_knn(conn, ref, v, Filters(), 60, pin)[0]
                    found[name] = [c.key for c in exact]
                elif name == "ann":
                    ann = search.ann_knn(conn, ref, v, Filters(), 60, pin, plan)[0]
                    found[name] = [c.key for c in ann]
                else:
                    search.exact_scan_floor(conn, ref, v, 60)
                times[name].append((time.perf_counter() - mark) * 1000)
            top10.append(len(set(found["exact"][:10]) & set(found["ann"][:10])) / 10)
            top60.append(len(set(found["exact"]) & set(found["ann"])) / 60)
    load.append(os.getloadavg())
    out = {name: percentiles(t) for name, t in times.items()}
    out |= {"top10_intact": sum(x == 1.0 for x in top10), "searches": len(top10)}
    out |= {"top60_overlap": float(np.mean(top60)), "load_average": load}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
