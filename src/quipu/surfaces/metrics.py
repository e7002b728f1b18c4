"""What `/metrics` reports (OPS-1), in the Prometheus text format (prometheus-client).

- ``quipu_http_requests_total`` and ``quipu_http_request_duration_seconds``: every HTTP request
  by route template (``/v1/memories/{memory_id}``, never a raw path), method and status code;
- ``quipu_refusals_total``: every error answer by its stable code (``rate_limited``,
  ``quota_exceeded``, ``invalid_text``...), HTTP and MCP alike;
- ``quipu_recall_stage_seconds``: each stage of every recall (embed, vector, text, fuse, load,
  total...), from the pipeline's own ``meta.timings``;
- ``quipu_embedder_failures_total``: embedding calls that failed (the service then falls back
  to keyword search or defers the vector), by operation;
- ``quipu_harvest_batches_total``: harvest batches accepted, extracted or dropped, and why;
- ``quipu_jobs`` and ``quipu_job_oldest_age_seconds``: the durable queue's depth and the age
  of its oldest job, by status, read from the store at scrape time.

With ``quipu serve --workers N`` the processes share one directory of metric files
(``PROMETHEUS_MULTIPROC_DIR``, set by the parent before they start), so any worker's
``/metrics`` answers for all of them.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from quipu.embeddings.base import Embedder, Vectors
from quipu.errors import EmbeddingUnavailable
from quipu.storage.base import Store

#: The environment variable naming the shared metrics directory of several processes.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter(
    "quipu_http_requests",
    "HTTP requests answered, by route template, method and status code.",
    ("route", "method", "code"),
    registry=REGISTRY,
)
LATENCY = Histogram(
    "quipu_http_request_duration_seconds",
    "Time from the request's arrival to the end of its answer.",
    ("route", "method", "code"),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
REFUSALS = Counter(
    "quipu_refusals",
    "Error answers by stable code and surface (rate_limited, quota_exceeded, ...).",
    ("code", "surface"),
    registry=REGISTRY,
)
RECALL_STAGES = Histogram(
    "quipu_recall_stage_seconds",
    "Duration of each recall stage (meta.timings of every recall).",
    ("stage",),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=REGISTRY,
)
EMBEDDER_FAILURES = Counter(
    "quipu_embedder_failures",
    "Embedding calls that failed (EmbeddingUnavailable), by operation.",
    ("operation",),
    registry=REGISTRY,
)

HARVEST = Counter(
    "quipu_harvest_batches",
    "Harvest batches (HARVEST-1) by outcome (accepted, extracted, dropped, refused, retried) "
    "and reason (the boundary, or why a batch was dropped: queue_full, store_unavailable, "
    "extraction_failed; refused: secret_detected or a fact's error code).",
    ("outcome", "reason"),
    registry=REGISTRY,
)


#: What a label becomes when its value is not one of the closed set: a client can send any
#: method name or reach any path, and a series per made-up value would grow ``/metrics`` and
#: the process without bound.
OTHER = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
STATUSES = frozenset(str(int(s)) for s in HTTPStatus)
SURFACES = frozenset({"http", "mcp", "console"})
#: Labels the server names itself (error codes, recall stages, harvest reasons) still pass a
#: shape check and a cap on distinct values, so a bug that lets a caller's text through cannot
#: grow the series either.
_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
MAX_NAMES = 256


class Names:
    """A label's open but bounded set: values of the right shape, the first :data:`MAX_NAMES`
    distinct ones; anything else is :data:`OTHER`."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if not _NAME.fullmatch(value):
            return OTHER
        with self._lock:
            if len(self._seen) >= MAX_NAMES:
                return OTHER
            self._seen.add(value)
        return value


_codes, _stages, _reasons = Names(), Names(), Names()


def method_label(method: str) -> str:
    return method if method in METHODS else OTHER


def status_label(code: int) -> str:
    status = str(code)
    return status if status in STATUSES else OTHER


def observe_harvest(outcome: str, reason: str) -> None:
    HARVEST.labels(_reasons(outcome), _reasons(reason)).inc()


def observe_request(route: str, method: str, code: int, seconds: float) -> None:
    """``route`` is a template of the app's own routes (or ``unmatched``): a closed set."""
    labels = (route, method_label(method), status_label(code))
    REQUESTS.labels(*labels).inc()
    LATENCY.labels(*labels).observe(seconds)


def observe_refusal(code: str, surface: str) -> None:
    REFUSALS.labels(_codes(code), surface if surface in SURFACES else OTHER).inc()


def observe_recall(meta: Mapping[str, Any]) -> None:
    """Each stage timing of one recall's meta (a fan-out's meta holds one per scope)."""
    scopes = meta.get("scopes")
    metas = scopes.values() if isinstance(scopes, Mapping) else [meta]
    for one in metas:
        timings = one.get("timings") if isinstance(one, Mapping) else None
        if not isinstance(timings, Mapping):
            continue
        for name, value in timings.items():
            if isinstance(name, str) and isinstance(value, int | float):
                RECALL_STAGES.labels(_stages(name.removesuffix("_ms"))).observe(value / 1000)


class CountingEmbedder(Embedder):
    """An embedder that counts its failures in :data:`EMBEDDER_FAILURES`, then re-raises them
    unchanged; everything else is the wrapped embedder's."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        try:
            return self.inner.embed_batch(texts)
        except EmbeddingUnavailable:
            EMBEDDER_FAILURES.labels("batch").inc()
            raise

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        try:
            return self.inner.embed_query(text)
        except EmbeddingUnavailable:
            EMBEDDER_FAILURES.labels("query").inc()
            raise

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        try:
            return self.inner.embed_queries(texts)
        except EmbeddingUnavailable:
            EMBEDDER_FAILURES.labels("query").inc()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class QueueCollector(Collector):
    """The job queue as the store holds it, read at each scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "quipu_jobs", "Jobs in the durable queue, by status.", None, ["status"]
        )
        age = GaugeMetricFamily(
            "quipu_job_oldest_age_seconds",
            "Age of the oldest job of each active status (0 when none).",
            None,
            ["status"],
        )
        now = datetime.now(UTC)
        for status, (count, oldest) in sorted(self.store.queue_stats().items()):
            depth.add_metric([status], count)
            age.add_metric([status], 0.0 if oldest is None else (now - oldest).total_seconds())
        yield depth
        yield age


def render(store: Store | None) -> bytes:
    """The text exposition of every metric: this process's, or every worker's when they share
    a directory, plus the queue read from ``store``."""
    registry = REGISTRY
    if os.environ.get(MULTIPROCESS_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    if store is not None:
        registry = _with(registry, QueueCollector(store))
    return generate_latest(registry)


def _with(registry: CollectorRegistry, collector: Collector) -> CollectorRegistry:
    """``registry`` plus ``collector`` for one scrape (the shared registry is not changed)."""
    combined = CollectorRegistry()
    combined.register(_Forward(registry))
    combined.register(collector)
    return combined


class _Forward(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        yield from self.registry.collect()


@dataclass(frozen=True)
class Latency:
    """Quantiles of one histogram, estimated from its buckets as Prometheus's
    ``histogram_quantile`` does (linear within a bucket), in seconds; ``None`` when nothing
    was observed."""

    count: int
    p50: float | None
    p95: float | None
    ceiling: float = 0.0
    """The highest finite bucket bound: a quantile equal to it means "at least this"."""


def recall_latency(stage: str = "total") -> Latency:
    """Recall ``stage`` latency (``total``: the whole pipeline, as ``meta.timings.total_ms``)
    over every recall this server answered since it started: this process's histogram, or
    every worker's when they share a metrics directory (the console's health page)."""
    registry = REGISTRY
    if os.environ.get(MULTIPROCESS_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    buckets: dict[float, float] = {}
    for family in registry.collect():
        if family.name != "quipu_recall_stage_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.labels.get("stage") == stage:
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    cumulative = sorted(buckets.items())
    count = int(cumulative[-1][1]) if cumulative else 0
    finite = [bound for bound, _ in cumulative if bound != float("inf")]
    return Latency(
        count,
        quantile(0.5, cumulative) if count else None,
        quantile(0.95, cumulative) if count else None,
        max(finite, default=0.0),
    )


def quantile(q: float, cumulative: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of a histogram given as (upper bound, cumulative count) pairs sorted
    by bound, the last ``+Inf``: linear interpolation inside the bucket that holds the rank;
    in the ``+Inf`` bucket, the highest finite bound (Prometheus's ``histogram_quantile``)."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, seen in cumulative:
        if seen >= rank:
            if bound == float("inf"):
                return lower
            inside = seen - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, seen
    return lower
