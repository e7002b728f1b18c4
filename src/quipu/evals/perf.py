"""Speed and memory benchmarks of the embedded engine (`quipu bench ingest|recall`).

Ingest goes through the public library path, one ``remember`` at a time, as an agent writes.
The large recall corpora (100k to 1M rows) are bulk-loaded through the store's import path.
Their vectors are the model's embeddings of the ~10k distinct sentence templates plus a little
noise (:class:`SentenceVectors`): real neighbourhoods, as a graph index needs, without
embedding every row (which would only measure the embedder again). Queries are real text,
embedded by the real model on every call, so the latency includes query embedding.
"""

from __future__ import annotations

import itertools
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from quipu.core.records import (
    Kind,
    MemoryVersion,
    Principal,
    Provenance,
    Relation,
    Scope,
    Source,
    Status,
    Trust,
)
from quipu.core.scopes import resolve_scope
from quipu.core.text import content_hash
from quipu.embedded import Quipu
from quipu.embeddings.base import Embedder
from quipu.evals.metrics import percentile

_LOAD_BATCH = 10_000
_PEOPLE = ["Dana", "Ravi", "Mei", "Jonas", "Amara", "Luis", "Sofia", "Kenji", "Olu", "Noor"]
_VERBS = ["prefers", "dislikes", "asked about", "booked", "mentioned", "is planning", "bought"]
_THINGS = [
    "window seats on long flights",
    "the quarterly budget review",
    "vegan restaurants downtown",
    "a trip to Lisbon in May",
    "the new deployment checklist",
    "green tea in the morning",
    "running the half marathon",
    "the Postgres migration plan",
    "jazz concerts on Fridays",
    "a standing desk for the office",
    "learning Portuguese",
    "the API rate limits",
    "hiking in the Alps",
    "the on-call rotation",
    "a birthday gift for her sister",
]
_QUALIFIERS = [
    "since last year",
    "every week",
    "for the team",
    "again",
    "after the meeting",
    "before the holidays",
    "with colleagues",
    "on weekends",
    "this quarter",
    "",
]


def sentence(rng: random.Random) -> str:
    """A plausible memory sentence (deterministic for a seeded ``rng``)."""
    tail = rng.choice(_QUALIFIERS)
    base = f"{rng.choice(_PEOPLE)} {rng.choice(_VERBS)} {rng.choice(_THINGS)}"
    return f"{base} {tail} (#{rng.randrange(10**6)})".replace("  ", " ")


class SentenceVectors:
    """Vectors shaped like real ones for :func:`sentence` texts: the model's embedding of the
    sentence without its ``(#n)`` suffix (about 10k distinct texts, each embedded once), plus
    a little Gaussian noise so no two rows are identical.

    Independent random unit vectors are the worst case for a graph index (no neighbourhoods:
    an HNSW index returned 20% of the true top-10 on them, at ten times the cost it has on
    real embeddings), so latency measured on them says little about real data.
    """

    def __init__(self, embedder: Embedder, seed: int, noise: float = 0.02) -> None:
        self._embedder = embedder
        self._noise = noise
        self._rng = np.random.default_rng(seed)
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        bases = [text.rsplit(" (#", 1)[0] for text in texts]
        missing = sorted(set(bases) - self._cache.keys())
        if missing:
            self._cache.update(zip(missing, self._embedder.embed_batch(missing), strict=True))
        out = np.stack([self._cache[b] for b in bases]).astype(np.float32)
        out += self._rng.standard_normal(out.shape).astype(np.float32) * self._noise
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 (metrics.percentile, numpy's linear definition), min, max, mean."""
    ordered = sorted(values)

    def pct(p: float) -> float:
        return percentile(ordered, p) if ordered else 0.0

    return {
        "p50": round(pct(50), 3),
        "p95": round(pct(95), 3),
        "p99": round(pct(99), 3),
        "min": round(ordered[0], 3) if ordered else 0.0,
        "max": round(ordered[-1], 3) if ordered else 0.0,
        "mean": round(statistics.fmean(ordered), 3) if ordered else 0.0,
    }


def rss_mib() -> float:
    """Resident memory of this process now, from /proc (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def ingest(
    mem: Quipu,
    n: int,
    *,
    defer_embedding: bool,
    seed: int = 7,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    rng = random.Random(seed)
    texts = [sentence(rng) for _ in range(n)]
    started = time.perf_counter()
    for i, text in enumerate(texts, start=1):
        mem.service.remember(mem.principal, text, scope="agent", defer_embedding=defer_embedding)
        if progress is not None and i % 100 == 0:
            progress(i)
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {
        "memories": n,
        "seconds": round(elapsed, 3),
        "memories_per_s": round(n / elapsed, 1),
        "defer_embedding": defer_embedding,
    }
    if defer_embedding:
        mark = time.perf_counter()
        embedded = mem.embed_pending()
        result["backfill_seconds"] = round(time.perf_counter() - mark, 3)
        result["backfill_per_s"] = round(embedded / max(result["backfill_seconds"], 1e-9), 1)
    return result


def synthetic_rows(
    mem: Quipu,
    n: int,
    owners: list[str],
    seed: int = 11,
    tenant_id: str | None = None,
    vectors: SentenceVectors | None = None,
) -> Iterator[tuple[MemoryVersion, np.ndarray]]:
    """``n`` version-1 rows spread evenly over ``owners`` (agent ids), in ``tenant_id``
    (default: the library's own tenant), with vectors from ``vectors`` or, without it,
    independent random unit vectors."""
    pin = mem.service.store.embedding_pin()
    assert pin is not None, "the store needs an embedder to hold vectors"
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    tenant = tenant_id or resolve_scope(mem.principal, "agent").tenant_id
    for start in range(0, n, _LOAD_BATCH):
        texts = [sentence(rng) for _ in range(min(_LOAD_BATCH, n - start))]
        if vectors is not None:
            block = vectors(texts)
        else:
            block = np_rng.standard_normal((len(texts), pin.dimension)).astype(np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
        for offset, text in enumerate(texts):
            i = start + offset
            memory = imported_fact(
                tenant,
                owners[i % len(owners)],
                text,
                at=now - timedelta(seconds=n - i),
                model=pin.model_id,
                memory_id=uuid.UUID(int=rng.getrandbits(128)).hex,
            )
            yield memory, block[offset]


def imported_fact(
    tenant_id: str,
    owner: str,
    text: str,
    *,
    at: datetime,
    model: str | None,
    memory_id: str | None = None,
    actor: str = "bench",
) -> MemoryVersion:
    """Version 1 of an active, imported fact in ``owner``'s agent scope, valid since a day
    before ``at`` — the row benchmarks and scale tests load in bulk."""
    return MemoryVersion(
        id=memory_id or uuid.uuid4().hex,
        version=1,
        tenant_id=tenant_id,
        scope=Scope.AGENT,
        owner=owner,
        project=None,
        text=text,
        kind=Kind.FACT,
        status=Status.ACTIVE,
        confidence=1.0,
        source=Source.IMPORTED,
        trust=Trust.VERIFIED,
        tags=(),
        metadata={},
        aliases=(),
        provenance=Provenance(surface=actor),
        observed_at=None,
        valid_at=at - timedelta(days=1),
        invalid_at=None,
        recorded_at=at,
        content_hash=content_hash(text),
        embedding_model=model,
        relation=Relation.IMPORTED,
        actor=actor,
    )


def _load(mem: Quipu, principal: Principal, rows: Iterator[tuple[MemoryVersion, Any]]) -> float:
    """Import ``rows`` in batches, so a million rows never sit in memory at once; returns the
    seconds spent in the store's import (not in making the rows and their vectors)."""
    spent = 0.0
    while batch := list(itertools.islice(rows, _LOAD_BATCH)):
        mark = time.perf_counter()
        mem.service.import_(principal, iter(batch))
        spent += time.perf_counter() - mark
    return spent


def _timed_recalls(
    mem: Quipu, principal: Principal, questions: list[str], warmup: int
) -> dict[str, Any]:
    """Recall each question in the principal's agent scope; the first ``warmup`` calls (the
    same questions, in order) are not timed, so the figures are of a warm store."""
    for q in questions[:warmup]:
        mem.service.recall(principal, q, scope="agent", k=10)
    latencies = []
    underfilled = 0
    paths: set[str] = set()
    stages: dict[str, list[float]] = {}
    cpu = time.process_time()
    for q in questions:
        t = time.perf_counter()
        result = mem.service.recall(principal, q, scope="agent", k=10)
        latencies.append((time.perf_counter() - t) * 1000)
        underfilled += int(result.meta["underfilled"])
        paths.add(result.meta["paths"].get("semantic", "none"))
        for stage, ms in result.meta["timings"].items():
            stages.setdefault(stage, []).append(ms)
    cpu_ms = (time.process_time() - cpu) * 1000 / max(len(questions), 1)
    return {
        "latency_ms": percentiles(latencies),
        "cpu_ms_per_recall": round(cpu_ms, 3),  # every thread of this process, all stages
        "stage_p50_ms": {stage: percentiles(ms)["p50"] for stage, ms in sorted(stages.items())},
        "underfilled_pages": underfilled,
        "vector_paths": sorted(paths),
    }


def recall_latency(
    open_store: Callable[[], Quipu],
    n: int,
    *,
    owners: int,
    queries: int,
    background: int = 0,
    background_tenants: int = 0,
    warmup: int = 50,
    seed: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Load ``n`` rows over ``owners`` scope owners (the measured one is owner 0) — plus
    ``background`` rows spread over ``background_tenants`` other tenants — then time recall
    in the measured scope: first query after a restart, then ``queries`` more (after
    ``warmup`` untimed ones). With background tenants, one small tenant's scope is timed as
    well (``background_scope``)."""
    mem = open_store()
    assert mem.service.embedder is not None, "recall latency needs the embedder"
    vectors = SentenceVectors(mem.service.embedder, seed)
    owner_ids = [mem.principal.agent_id or "agent"] + [f"bench-agent-{i}" for i in range(1, owners)]
    others = [
        replace(mem.principal, tenant_id=f"bench-tenant-{i:04d}") for i in range(background_tenants)
    ]
    if progress:
        progress(f"loading {n} rows over {owners} owner(s)")
    mark = time.perf_counter()
    load_s = _load(mem, mem.principal, synthetic_rows(mem, n, owner_ids, seed, vectors=vectors))
    for i, principal in enumerate(others):
        if progress and i % 100 == 0:
            progress(f"loading background tenants {i}/{len(others)}")
        share = background // len(others) + (1 if i < background % len(others) else 0)
        rows = synthetic_rows(mem, share, owner_ids[:1], seed + 1 + i, principal.tenant_id, vectors)
        load_s += _load(mem, principal, rows)
    prepare_s = time.perf_counter() - mark - load_s
    if progress:
        progress("maintain (per-scope indexes where the backend keeps them)")
    mark = time.perf_counter()
    mem.service.store.maintain()  # e.g. per-scope ANN indexes on PostgreSQL; nothing on SQLite
    maintain_s = time.perf_counter() - mark
    size_bytes = mem.service.store.storage_bytes()
    mem.close()
    backend = mem.service.store.capabilities.backend
    total = n + (background if others else 0)

    rng = random.Random(seed)
    questions = [
        f"what does {rng.choice(_PEOPLE)} think about {rng.choice(_THINGS)}?"
        for _ in range(queries)
    ]
    if progress:
        progress("restart, first recall")
    mark = time.perf_counter()
    mem = open_store()
    mem.recall(questions[0], scope="agent", k=10)
    first_s = time.perf_counter() - mark
    measured = _timed_recalls(mem, mem.principal, questions, warmup)
    small = None
    if others:
        small = {
            "tenant_rows": background // len(others),
            **_timed_recalls(mem, others[len(others) // 2], questions, warmup),
        }
    rss = rss_mib()
    mem.close()
    return {
        "rows": total,
        "owners": owners,
        "scope_rows": n // owners + (1 if n % owners else 0),
        "background_rows": background if others else 0,
        "background_tenants": len(others),
        "queries": queries,
        "warmup_queries": warmup,
        "prepare_seconds": round(prepare_s, 2),
        "load_seconds": round(load_s, 2),
        "load_rows_per_s": round(total / max(load_s, 1e-9), 1),
        "maintain_seconds": round(maintain_s, 2),
        "first_recall_after_restart_s": round(first_s, 3),
        **measured,
        "background_scope": small,
        "rss_mib": rss,
        "backend": backend,
        "storage_bytes": size_bytes,
        "bytes_per_row": round(size_bytes / max(total, 1)),
    }


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "pid": os.getpid()}
