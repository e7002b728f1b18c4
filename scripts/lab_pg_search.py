"""PostgreSQL search statements, an older version against this one, in one process (issue 23).

Each search runs with both versions of ``quipu.storage.postgres.search`` back to back on one
connection (the order alternating), so both see the same load, cache and data; the answers are
compared search by search (keys and scores). ``--before`` is the older module's file, e.g.::

    git show 4e1ff72:src/quipu/storage/postgres/search.py > /tmp/search_before.py
    python scripts/lab_pg_search.py keyword --db postgresql://… --owner scale-100000 \
        --before /tmp/search_before.py
    python scripts/lab_pg_search.py vector --db postgresql://… --owner scale-10000 \
        --before /tmp/search_before.py

``keyword``: BM25 (``bm25``) for LoCoMo's 100 sampled undated questions and every dated one,
each dated question also inside each window it names (what recall runs). ``vector``: the
exact path (``exact_knn``) for the undated questions over the whole scope. Nothing here is
part of Quipu; the store is the one ``quipu bench scale --db`` built (agent scope of
``--owner`` in ``--tenant``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from quipu.core.query import Filters
from quipu.core.records import Scope, ScopeRef
from quipu.evals.perf import percentiles
from quipu.evals.scale import questions
from quipu.retrieval.expansion import query_keys
from quipu.retrieval.temporal import query_windows, window_filters
from quipu.storage.postgres import search

DATA = Path("../shared/data/locomo/locomo10.json")  # as `quipu bench` finds it


def load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("search_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["search_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def searches(data: Path, undated: int) -> list[tuple[str, Filters]]:
    dated, others = questions(data, undated)
    asked = [(q, Filters()) for q in others]
    for q in dated:
        asked.append((q, Filters()))
        for window in query_windows(q):
            if (narrowed := window_filters(Filters(), window)) is not None:
                asked.append((q, narrowed))
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["keyword", "vector"])
    parser.add_argument("--db", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--tenant", default="local")
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--undated", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    before = load_module(args.before)
    ref = ScopeRef(args.tenant, Scope.AGENT, args.owner)
    conn = psycopg.connect(args.db, autocommit=True)
    register_vector(conn)
    load = [os.getloadavg()]
    times: dict[str, list[float]] = {"before": [], "after": []}
    same, differ, paths = 0, [], {}  # type: ignore[var-annotated]
    if args.stage == "keyword":
        asked: list[Any] = searches(args.data, args.undated)

        def run(module: Any, item: Any) -> Any:
            text, flt = item
            return module.bm25(conn, ref, query_keys(text, 0.0), flt, 60, search.SearchPlan())
    else:
        import quipu

        mem = quipu.open(args.db, worker_embedded=False)
        embedder = mem.service.embedder
        pin = mem.service.store.embedding_pin()
        assert embedder is not None and pin is not None
        _, others = questions(args.data, args.undated)
        asked = [np.asarray(embedder.embed_query(q), dtype=np.float32) for q in others]
        mem.close()

        def run(module: Any, item: Any) -> Any:
            return module.exact_knn(conn, ref, item, Filters(), 60, pin), "exact-btree", 0

    for _ in range(args.rounds):
        for i, item in enumerate(asked):
            order = [("before", before), ("after", search)]
            out = {}
            for name, module in order[:: -1 if i % 2 else 1]:
                mark = time.perf_counter()
                out[name] = run(module, item)
                times[name].append((time.perf_counter() - mark) * 1000)
            a, b = out["before"][0][0], out["after"][0][0]
            if [(c.key, c.score) for c in a] == [(c.key, c.score) for c in b]:
                same += 1
            else:
                # rows of equal score may swap when the sum's last bit differs (order of terms)
                tie = {c.key for c in a} == {c.key for c in b} and all(
                    abs(x.score - y.score) < 1e-12 for x, y in zip(a, b, strict=True)
                )
                differ.append({"search": i, "same_rows_ties_only": tie})
            paths[out["after"][1]] = paths.get(out["after"][1], 0) + 1
    load.append(os.getloadavg())
    result = {
        "stage": args.stage,
        "owner": args.owner,
        "searches": len(times["after"]),
        "before_ms": percentiles(times["before"]),
        "after_ms": percentiles(times["after"]),
        "identical": same,
        "differ": differ,
        "paths_after": paths,
        "load_average": [[round(x, 2) for x in la] for la in load],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
