"""Evaluation: benchmark loaders, retrieval metrics, baselines and token counting (EVAL).

Nothing here imports bm25s or tiktoken (development dependencies) until it is used.
"""

from __future__ import annotations

from quipu.evals.baselines import BatchEmbedder, BM25Baseline, DenseBaseline
from quipu.evals.datasets import (
    Conversation,
    DatasetFormatError,
    LMEQuestion,
    LMESession,
    LMETurn,
    LoCoMoQuestion,
    LoCoMoSession,
    LoCoMoTurn,
    load_locomo,
    load_longmemeval,
)
from quipu.evals.metrics import (
    DEFAULT_KS,
    GroupSummary,
    QuestionResult,
    Summary,
    mrr,
    ndcg_at_k,
    percentile,
    precision_at_k,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    score_question,
    sessions_from_ranked_turns,
    summarise,
)
from quipu.evals.tokens import count_tokens

__all__ = [
    "DEFAULT_KS",
    "BM25Baseline",
    "BatchEmbedder",
    "Conversation",
    "DatasetFormatError",
    "DenseBaseline",
    "GroupSummary",
    "LMEQuestion",
    "LMESession",
    "LMETurn",
    "LoCoMoQuestion",
    "LoCoMoSession",
    "LoCoMoTurn",
    "QuestionResult",
    "Summary",
    "count_tokens",
    "load_locomo",
    "load_longmemeval",
    "mrr",
    "ndcg_at_k",
    "percentile",
    "precision_at_k",
    "recall_all_at_k",
    "recall_any_at_k",
    "recall_at_k",
    "score_question",
    "sessions_from_ranked_turns",
    "summarise",
]
