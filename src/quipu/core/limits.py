"""The bounds and ranking settings one service enforces, taken from :class:`Settings` by the
composition root: sizes and quotas of writes, page and query limits, and the knobs of the recall
pipeline (:mod:`quipu.retrieval.pipeline`)."""

from __future__ import annotations

from dataclasses import dataclass

from quipu.settings import Settings


@dataclass(frozen=True)
class Limits:
    """The bounds the service enforces, taken from settings by the composition root."""

    max_text_bytes: int = 16_384
    max_metadata_bytes: int = 16_384
    max_tags: int = 32
    max_aliases: int = 32
    max_query_chars: int = 500
    quota_per_owner: int = 10_000
    default_k: int = 10
    max_k: int = 100
    max_page: int = 200
    candidate_depth: int = 100
    rrf_k: int = 60
    weight_vector: float = 0.7
    weight_text: float = 0.3
    fusion: str = "score"
    temporal_boost: float = 0.2
    session_weight: float = 1.0
    feedback_weight: float = 0.5
    query_expansion: float = 0.0
    focus_weight: float = 2.0
    focus_share: float = 0.4
    reranker: str = ""  # the setting, reported by benchmarks; the model is passed apart
    rerank_sessions: int = 10
    rerank_turns: int = 5
    rerank_weight: float = 2.0
    recall_concurrency: int | None = None  # None: no bound
    document_job_chars: int = 100_000
    graph_weight: float = 0.0
    graph_share: float = 0.05
    topic_weight: float = 0.0
    topic_share: float = 0.01

    @classmethod
    def from_settings(cls, s: Settings, *, cpus: int = 1, embedded: bool = True) -> Limits:
        """``cpus``: this machine's processor count; ``embedded``: the store searches in this
        process (SQLite). Both set ``recall_concurrency`` when the setting is empty: an
        embedded recall is all CPU, so one per core of each worker process; a PostgreSQL
        recall mostly waits for the database, so no bound beyond its connection pool."""
        values = {name: getattr(s, name) for name in cls.__dataclass_fields__}
        if s.recall_concurrency is None and embedded:
            # ``workers`` is resolved by `quipu serve`; anywhere else this is one process.
            values["recall_concurrency"] = max(1, cpus // (s.workers or 1))
        return cls(**values)
