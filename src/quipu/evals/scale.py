"""Scale benchmark (`quipu bench scale`, issue 23): recall at 1k-100k memories per scope.

The store is built from real dialogue turns (LoCoMo: ~5.9k turns, each observed at its
session's date), topped up with variants until it holds ``n`` rows. Variant ``r`` of a turn is
the turn's text with ``(#r)`` appended, its vector the model's embedding of the turn plus a
little Gaussian noise (unit length again), and its observation time moved ``r * 211`` days
earlier, so the store's history spans years and a date named in a question selects a narrow
window, as in a long-lived agent's memory. Earlier, never later: a variant dated after the
present is not yet valid, so recall cannot see it, yet it is the scope's newest row (the first
that a walk by recency reads); 100k rows moved later left 60 % of the scope in the future.
The turn embeddings are computed once with the real model and kept in ``cache_dir``; a built
store is reused (``build`` is skipped when the scope already holds ``n`` rows).

Questions are LoCoMo's own: every question naming a date (the dated path of recall: keyword and
vector searches restricted to the window, :mod:`quipu.retrieval.temporal`) and a seeded sample
of the others. Each recall's top-10 ids are kept, so two runs (before and after a change) can be
compared question by question (:func:`paired`).

The floors are measured in the same process on the same vectors: the query embedding alone, a
numpy exact scan of the scope's vectors, and on PostgreSQL the database's own exact scan of the
scope alone (``ORDER BY vector <#> q`` over the scope's rows, nothing else). Every figure can
then be read as a ratio to what the machine does at best.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from quipu.core.records import MemoryVersion, Principal
from quipu.core.scopes import resolve_scope
from quipu.core.text import embedding_key
from quipu.embedded import Quipu
from quipu.embeddings.base import Embedder
from quipu.evals.datasets import load_locomo
from quipu.evals.http_load import free_port
from quipu.evals.perf import percentiles, rss_mib
from quipu.evals.scale_build import Row, Writer, agent_scope, tenant_name, tenant_rows
from quipu.retrieval.temporal import query_windows

__all__ = [
    "Corpus",
    "build",
    "build_tenants",
    "floors",
    "paired",
    "questions",
    "recall_runs",
    "rss_walk",
    "run",
    "small_tenant",
]

#: The owner of each small tenant's measured scope.
SMALL = "small"
_SHIFT_DAYS = 211
_NOISE = 0.02


@dataclass(frozen=True)
class Corpus:
    """The turns a store is built from and their embeddings by the real model."""

    texts: list[str]
    observed: list[Any]
    vectors: npt.NDArray[np.float32]

    @classmethod
    def load(cls, data: Path, embedder: Embedder, cache_dir: Path) -> Corpus:
        turns = [t for c in load_locomo(data) for t in c.turns]
        texts = [t.text for t in turns]
        digest = hashlib.sha256("\x1f".join(texts).encode()).hexdigest()[:12]
        cache = cache_dir / f"turns-{digest}-{embedder.dimension}.npy"
        if cache.exists():
            vectors = np.load(cache)
        else:
            vectors = np.asarray(embedder.embed_batch(texts), dtype=np.float32)
            cache_dir.mkdir(parents=True, exist_ok=True)
            np.save(cache, vectors)
        # one row per distinct text: a repeated turn ("Thanks!") would be a live exact
        # duplicate, which the store does not write twice
        first = list({embedding_key(t): i for i, t in reversed(list(enumerate(texts)))}.values())
        keep = sorted(first)
        return cls([texts[i] for i in keep], [turns[i].observed_at for i in keep], vectors[keep])

    def rows(self, n: int, seed: int = 23) -> Iterator[tuple[str, Any, npt.NDArray[np.float32]]]:
        """``n`` (text, observed_at, vector) rows: the turns, then their variants."""
        rng = np.random.default_rng(seed)
        base = len(self.texts)
        for start in range(0, n, base):
            r = start // base
            take = min(base, n - start)
            block = self.vectors[:take].copy()
            if r:
                block += rng.standard_normal(block.shape).astype(np.float32) * _NOISE
                block /= np.linalg.norm(block, axis=1, keepdims=True)
            shift = timedelta(days=-r * _SHIFT_DAYS)  # into the past: every row is valid
            for i in range(take):
                text = self.texts[i] if r == 0 else f"{self.texts[i]} (#{r})"
                yield text, self.observed[i] + shift, block[i]


def build(
    mem: Quipu,
    corpus: Corpus,
    n: int,
    owner: str,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Load ``n`` rows into ``owner``'s agent scope (of ``tenant``, default the library's own)
    through the batch insert path (:class:`quipu.evals.scale_build.Writer`), skipped when it
    holds them already."""
    ref = resolve_scope(_principal(mem, owner, tenant), "agent")
    store = mem.service.store
    if store.count_live(ref) >= n:
        return {"rows": n, "built": False}
    pin = store.embedding_pin()
    assert pin is not None, "the scale bench needs the embedder"
    writer = Writer(store, pin.model_id, graph=_mirrors(mem))
    wrote = writer.write([(ref, lambda: corpus.rows(n))])
    mark = time.perf_counter()
    store.maintain()
    return {
        "rows": n,
        "built": True,
        "load_seconds": wrote["seconds"],
        "rows_per_s": wrote["rows_per_s"],
        "maintain_seconds": round(time.perf_counter() - mark, 1),
    }


def build_tenants(
    mem: Quipu,
    corpus: Corpus,
    tenants: list[int],
    per_tenant: int,
    *,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Load the small tenants numbered ``tenants`` (each ``per_tenant`` rows in the agent
    scope of ``small``: :func:`quipu.evals.scale_build.tenant_rows`), many per transaction;
    tenants already holding their rows are skipped."""
    store = mem.service.store
    pin = store.embedding_pin()
    assert pin is not None, "the scale bench needs the embedder"
    wanted = {agent_scope(tenant_name(t), SMALL): t for t in tenants}
    writer = Writer(store, pin.model_id, graph=_mirrors(mem))
    todo = writer.missing((ref, per_tenant) for ref in wanted)
    wrote = writer.write(
        ((ref, _rows_of(corpus, wanted[ref], per_tenant)) for ref, _ in todo), say=say
    )
    mark = time.perf_counter()
    if todo:
        store.maintain()
    return {
        "tenants": len(tenants),
        "built": len(todo),
        **wrote,
        "maintain_seconds": round(time.perf_counter() - mark, 1),
    }


def _mirrors(mem: Quipu) -> bool:
    """Whether the store writes a graph mirror with each memory (setting ``graph_extract``):
    the build writes what a ``remember`` would."""
    return mem.service.graph is not None


def _rows_of(corpus: Corpus, index: int, n: int) -> Callable[[], list[Row]]:
    return lambda: tenant_rows(corpus, index, n)


def _observed(memory: MemoryVersion, at: Any) -> MemoryVersion:
    return replace(memory, observed_at=at)


def _principal(mem: Quipu, owner: str, tenant: str | None = None) -> Principal:
    return replace(mem.principal, agent_id=owner, tenant_id=tenant or mem.principal.tenant_id)


def questions(data: Path, undated: int, seed: int = 5) -> tuple[list[str], list[str]]:
    """(every LoCoMo question naming a date, a seeded sample of ``undated`` others)."""
    asked = list(dict.fromkeys(q.question for c in load_locomo(data) for q in c.questions))
    dated = [q for q in asked if query_windows(q)]
    others = [q for q in asked if not query_windows(q)]
    return dated, random.Random(seed).sample(others, min(undated, len(others)))


def recall_runs(
    mem: Quipu,
    owner: str,
    asked: list[str],
    *,
    warmup: int = 10,
    k: int = 10,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Recall every question in ``owner``'s agent scope: latency p50/p95, stage p50/p95 and
    each question's top-``k`` ids (for :func:`paired`)."""
    principal = _principal(mem, owner, tenant)
    for q in asked[:warmup]:
        mem.service.recall(principal, q, scope="agent", k=k)
    latencies: list[float] = []
    stages: dict[str, list[float]] = {}
    paths: dict[str, int] = {}
    results: dict[str, list[str]] = {}
    for q in asked:
        mark = time.perf_counter()
        result = mem.service.recall(principal, q, scope="agent", k=k)
        latencies.append((time.perf_counter() - mark) * 1000)
        results[q] = [h.memory.id for h in result.results]
        for stage, ms in result.meta["timings"].items():
            stages.setdefault(stage, []).append(ms)
        path = str(result.meta["paths"].get("semantic", "none"))
        paths[path] = paths.get(path, 0) + 1
    return {
        "questions": len(asked),
        "latency_ms": percentiles(latencies),
        "stages_ms": {
            stage: {"p50": percentiles(v)["p50"], "p95": percentiles(v)["p95"]}
            for stage, v in sorted(stages.items())
        },
        "vector_paths": paths,
        "results": results,
        "each_ms": latencies,
    }


def paired(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, Any]:
    """Question by question: how many pages are identical, and the questions whose differ."""
    common = sorted(before.keys() & after.keys())
    differ = [q for q in common if before[q] != after[q]]
    return {"questions": len(common), "identical": len(common) - len(differ), "differ": differ}


def floors(mem: Quipu, owner: str, asked: list[str], *, limit: int = 60) -> dict[str, Any]:
    """What the machine does at best on the same data: the query embedding alone, numpy's
    exact scan of the scope's vectors and, where the store has one (PostgreSQL), the database's
    own exact scan of the scope alone (``sql_exact_scan_ms``)."""
    embedder = mem.service.embedder
    assert embedder is not None
    ref = resolve_scope(_principal(mem, owner), "agent")
    store = mem.service.store
    embed_ms, queries = [], []
    for q in asked:
        mark = time.perf_counter()
        queries.append(np.asarray(embedder.embed_query(q), dtype=np.float32))
        embed_ms.append((time.perf_counter() - mark) * 1000)
    matrix = _scope_vectors(store, ref)
    keep = min(limit, max(int(matrix.shape[0]) - 1, 0))
    numpy_ms = _timed(lambda q: np.argpartition(-(matrix @ q), keep)[:limit], queries)
    out: dict[str, Any] = {
        "query_embedding_ms": percentiles(embed_ms),
        "numpy_exact_scan_ms": numpy_ms,
        "scope_vectors": int(matrix.shape[0]),
    }
    scan = getattr(store, "exact_scan_floor", None)
    if scan is not None:
        out["sql_exact_scan_ms"] = _timed(lambda q: scan(ref, q, limit), queries)
    return out


def _scope_vectors(store: Any, ref: Any) -> npt.NDArray[np.float32]:
    vectors: npt.NDArray[np.float32] = np.asarray(store.scope_vectors(ref), dtype=np.float32)
    return vectors.reshape(-1, store.embedding_pin().dimension)


def _timed(run: Callable[[Any], Any], queries: list[Any]) -> dict[str, float]:
    ms = []
    for q in queries:
        mark = time.perf_counter()
        run(q)
        ms.append((time.perf_counter() - mark) * 1000)
    return percentiles(ms)


_LIBRARY_START = """
import sys, time
mark = time.perf_counter()
import quipu
mem = quipu.open(sys.argv[1], worker_embedded=False, local_agent_id=sys.argv[2])
mem.recall(sys.argv[3], scope="agent", k=10)
first = time.perf_counter() - mark
status = open("/proc/self/status").read()
rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")]
print(round(first, 3), round(rss[0] / 1024, 1) if rss else 0.0)
"""


def cold_library(target: str, owner: str, question: str) -> dict[str, Any]:
    """A fresh Python process: ``import quipu``, open the store, first recall in ``owner``'s
    scope (seconds from the first line), and the process's RSS after it."""
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY_START, target, owner, question],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    first, rss = done.stdout.split()
    return {"first_recall_s": float(first), "rss_mib": float(rss)}


def cold_serve(target: str, owner: str, question: str, workdir: Path) -> dict[str, Any]:
    """``quipu serve`` (its default workers) started in a child process: seconds until the
    first HTTP recall in ``owner``'s scope answers, and the RSS of every server process."""
    port = free_port()
    env = {
        **os.environ,
        "QUIPU_LOG_LEVEL": "warning",
        "QUIPU_LOCAL_AGENT_ID": owner,
        "QUIPU_WORKER_EMBEDDED": "false",
    }
    url = f"http://127.0.0.1:{port}/v1/recall"
    mark = time.perf_counter()
    with (workdir / "serve-cold.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "quipu", "serve", "--db", target, "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        first = None
        while first is None and time.perf_counter() - mark < 600:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited early; see {workdir / 'serve-cold.log'}")
            try:
                reply = httpx.post(url, json={"query": question, "k": 10}, timeout=60)
                if reply.status_code == 200:
                    first = time.perf_counter() - mark
            except httpx.HTTPError:
                time.sleep(0.05)
        rss = _tree_rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"first_http_recall_s": None if first is None else round(first, 3), **rss}


def _tree_rss_mib(pid: int) -> dict[str, Any]:
    """RSS of ``pid`` and of its children (uvicorn's worker processes), from /proc."""
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    each = []
    for p in pids:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        kib = [int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")]
        each.append(round(kib[0] / 1024, 1) if kib else 0.0)
    return {"rss_mib_per_process": each, "rss_mib_total": round(sum(each), 1)}


def ingest(mem: Quipu, corpus: Corpus, turns: int, owner: str) -> dict[str, Any]:
    """Real dialogue turns through ``remember``, one at a time, at the store's defaults."""
    principal = _principal(mem, owner)
    texts = [f"{t} [{owner}]" for t in corpus.texts[:turns]]
    mark = time.perf_counter()
    for text in texts:
        mem.service.remember(principal, text, scope="agent")
    seconds = time.perf_counter() - mark
    return {
        "turns": len(texts),
        "seconds": round(seconds, 2),
        "turns_per_s": round(len(texts) / seconds, 1),
    }


def ingest_many(
    mem: Quipu, corpus: Corpus, turns: int, owner: str, batch: int = 100
) -> dict[str, Any]:
    """The same turns through ``remember_many``, ``batch`` per call, at the store's defaults
    (issue 23: the bulk write embeds a call's texts together and writes them in one
    transaction)."""
    from quipu.memory_batch import remember_many

    principal = _principal(mem, owner)
    texts = [f"{t} [{owner}]" for t in corpus.texts[:turns]]
    mark = time.perf_counter()
    for start in range(0, len(texts), batch):
        remember_many(mem.service, principal, texts[start : start + batch], scope="agent")
    seconds = time.perf_counter() - mark
    return {
        "turns": len(texts),
        "batch": batch,
        "seconds": round(seconds, 2),
        "turns_per_s": round(len(texts) / seconds, 1),
    }


def run(
    target: str,
    *,
    data: Path,
    cache_dir: Path,
    sizes: list[int],
    tenants: int = 0,
    per_tenant: int = 1000,
    alone: str | None = None,
    rounds: int = 3,
    rss_walk: bool = True,
    graph: bool = True,
    undated: int = 100,
    ingest_turns: int = 300,
    cold: bool = True,
    details: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The whole benchmark on one store (``target``: a file or a PostgreSQL URL). With
    ``tenants``, the middle small tenant is also built alone in ``alone`` (a file or URL; None:
    a temporary file) and recalled in both stores in ``rounds`` interleaved rounds."""
    say = progress or (lambda _msg: None)
    load = os.getloadavg()
    mem = quipu_open(target, graph=graph)
    embedder = mem.service.embedder
    assert embedder is not None, "the scale bench needs the embedder"
    corpus = Corpus.load(data, embedder, cache_dir)
    dated, others = questions(data, undated)
    out: dict[str, Any] = {
        "backend": mem.service.store.capabilities.backend,
        "load_average_at_start": [round(x, 2) for x in load],
        "questions": {"dated": len(dated), "undated": len(others)},
        "scopes": {},
    }
    for n in sizes:
        owner = f"scale-{n}"
        say(f"building a {n}-row scope")
        built = build(mem, corpus, n, owner)
        say(f"recall in the {n}-row scope")
        rows: dict[str, Any] = {"build": built}
        for label, asked in (("dated", dated), ("undated", others)):
            runs = recall_runs(mem, owner, asked)
            runs.pop("each_ms")
            if not details:
                runs.pop("results")
            rows[label] = runs
        rows["floors"] = floors(mem, owner, others[:50])
        out["scopes"][str(n)] = rows
    if tenants:
        say(f"building {tenants} tenants x {per_tenant} rows")
        out["tenants_build"] = build_tenants(mem, corpus, list(range(tenants)), per_tenant, say=say)
        say("the middle tenant inside the store and alone, interleaved")
        out["small_tenant"] = small_tenant(
            mem, alone, corpus, tenants, per_tenant, others, rounds=rounds, graph=graph
        )
    if ingest_turns:
        say(f"ingest: {ingest_turns} turns through remember")
        out["ingest"] = ingest(mem, corpus, ingest_turns, f"ingest-{time.time_ns()}")
        out["ingest_many"] = ingest_many(mem, corpus, ingest_turns, f"many-{time.time_ns()}")
    out["rss_mib_after"] = rss_mib()
    mem.close()
    if tenants and rss_walk:
        say(f"RSS of one process recalling in {tenants} small tenants, then the largest scope")
        out["rss_walk"] = rss_walk_run(target, tenants, f"scale-{max(sizes)}" if sizes else None)
    if cold and sizes:
        largest = f"scale-{max(sizes)}"
        say("cold start: library")
        out["cold_library"] = cold_library(target, largest, others[0])
        say("cold start: quipu serve")
        with tempfile.TemporaryDirectory() as tmp:
            out["cold_serve"] = cold_serve(target, largest, others[0], Path(tmp))
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def small_tenant(
    mem: Quipu,
    alone: str | None,
    corpus: Corpus,
    tenants: int,
    per_tenant: int,
    asked: list[str],
    *,
    rounds: int = 3,
    graph: bool = True,
) -> dict[str, Any]:
    """The middle small tenant recalled inside ``mem``'s store and alone in a fresh store
    (``alone``: a file or URL holding nothing else; None: a temporary file), in ``rounds``
    interleaved rounds in this one process: latency in each, their p50/p95 ratio, and how many
    questions got the same top-10 in both (the tenant's rows carry the same ids in both)."""
    index = tenants // 2
    with tempfile.TemporaryDirectory() as tmp:
        lone = quipu_open(alone or str(Path(tmp) / "alone.db"), graph=graph)
        try:
            lone_build = build_tenants(lone, corpus, [index], per_tenant)
            each: dict[str, list[float]] = {"in_store": [], "alone": []}
            pages: dict[str, dict[str, list[str]]] = {}
            for _ in range(rounds):
                for label, where in (("in_store", mem), ("alone", lone)):
                    runs = recall_runs(where, SMALL, asked, tenant=tenant_name(index))
                    each[label] += runs["each_ms"]
                    pages[label] = runs["results"]
        finally:
            lone.close()
    inside, apart = percentiles(each["in_store"]), percentiles(each["alone"])
    return {
        "tenant": tenant_name(index),
        "per_tenant": per_tenant,
        "store_tenants": tenants,
        "rounds": rounds,
        "alone_build": lone_build,
        "in_store_ms": inside,
        "alone_ms": apart,
        "ratio_p50": round(inside["p50"] / apart["p50"], 3) if apart["p50"] else None,
        "ratio_p95": round(inside["p95"] / apart["p95"], 3) if apart["p95"] else None,
        "same_pages": paired(pages["alone"], pages["in_store"]),
    }


_RSS_WALK = """
import json, sys
from quipu.evals.scale import rss_walk
print(json.dumps(rss_walk(sys.argv[1], int(sys.argv[2]), sys.argv[3] or None)))
"""


def rss_walk_run(target: str, tenants: int, large: str | None) -> dict[str, Any]:
    """:func:`rss_walk` in a fresh Python process."""
    done = subprocess.run(
        [sys.executable, "-c", _RSS_WALK, target, str(tenants), large or ""],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    walked: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return walked


def rss_walk(
    target: str, tenants: int, large: str | None, asked: int = 2, **settings: Any
) -> dict[str, Any]:
    """Open ``target`` (with ``settings``) and recall ``asked`` questions in each of
    ``tenants`` small tenants in turn, then in ``large``'s scope: this process's RSS after
    opening, after each step of scopes touched, and after the large scope (does memory grow
    with the scopes touched?)."""
    mem = quipu_open(target, **settings)
    questions_ = ["What did they paint last summer?", "Where does she work now?"][:asked]
    out: dict[str, Any] = {"after_open_mib": rss_mib(), "after_scopes_mib": {}}
    marks = {1, 10, 100, 250, 500, 750, tenants}
    mark = time.perf_counter()
    for t in range(tenants):
        principal = _principal(mem, SMALL, tenant_name(t))
        for q in questions_:
            mem.service.recall(principal, q, scope="agent", k=10)
        if t + 1 in marks:
            out["after_scopes_mib"][str(t + 1)] = rss_mib()
    out["seconds_small_scopes"] = round(time.perf_counter() - mark, 1)
    if large is not None:
        for q in questions_ * 5:
            mem.service.recall(_principal(mem, large), q, scope="agent", k=10)
        out["after_large_scope_mib"] = rss_mib()
    mem.close()
    return out


def quipu_open(target: str, *, graph: bool = True, **settings: Any) -> Quipu:
    """The store under test, at its defaults (no job worker thread) but ``settings``; ``graph``
    False opens it with ``graph_extract`` off (no graph mirror written with each memory)."""
    from quipu.embedded import open as open_store

    return open_store(target, worker_embedded=False, graph_extract=graph, **settings)
