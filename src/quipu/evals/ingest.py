"""Writing benchmark conversations through the library, turn by turn as an agent would, and
counting what the store made of each turn. Shared by the public benchmarks
(:mod:`quipu.evals.public_bench`) and the synthetic eval (:mod:`quipu.evals.retrieval_eval`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quipu.core.limits import Limits
from quipu.core.records import Status
from quipu.embedded import Quipu
from quipu.errors import QuipuError

#: The settings that shape a ranking, reported with every benchmark run.
RANKING_SETTINGS = (
    "fusion",
    "candidate_depth",
    "weight_vector",
    "weight_text",
    "temporal_boost",
    "session_weight",
    "feedback_weight",
    "query_expansion",
    "focus_weight",
    "focus_share",
    "reranker",
    "rerank_sessions",
    "rerank_turns",
    "rerank_weight",
    "rrf_k",
    "max_k",
    "graph_weight",
    "graph_share",
    "topic_weight",
    "topic_share",
)


def ranking_settings(limits: Limits) -> dict[str, Any]:
    return {name: getattr(limits, name) for name in RANKING_SETTINGS}


@dataclass
class IngestStats:
    turns: int = 0
    memories: int = 0
    duplicates: int = 0
    """Turns whose text repeated an earlier turn: ``remember`` returned the existing memory."""
    quarantined: int = 0
    """Turns stored quarantined (injection-like text): never returned by recall."""
    refused: dict[str, int] = field(default_factory=dict)
    """Turns ``remember`` refused, by error code (secret_detected, text_too_long, ...)."""


def remember_turn(
    mem: Quipu,
    stats: IngestStats,
    turns_of: dict[str, list[str]],
    turn_id: str,
    text: str,
    **options: Any,
) -> None:
    """``remember`` one turn, map the memory it became (or repeated) back to ``turn_id`` in
    ``turns_of`` (memory id -> turn ids), and count the outcome; a refusal is counted, not
    raised."""
    stats.turns += 1
    try:
        written = mem.remember_result(text, **options)
    except QuipuError as error:
        stats.refused[error.code] = stats.refused.get(error.code, 0) + 1
        return
    memory = written.memory
    turns_of.setdefault(memory.id, []).append(turn_id)
    if not written.created:
        stats.duplicates += 1
        return
    stats.memories += 1
    if memory.status is Status.QUARANTINED:
        stats.quarantined += 1
