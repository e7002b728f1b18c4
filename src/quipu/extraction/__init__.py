"""Extraction: propose long-term memories from session turns (PROMO-3).

:class:`DeterministicExtractor` (the default) needs no model; :class:`ModelExtractor` asks
any OpenAI-compatible chat endpoint with a versioned prompt and a strict schema. Both sit
behind :class:`Extractor`, and neither writes anything: gating and storage belong to the
promotion job.
"""

from __future__ import annotations

from quipu.extraction.base import (
    Candidate,
    ExtractionFailed,
    ExtractionFailure,
    ExtractionResult,
    Extractor,
    Turn,
)
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.extraction.model import ModelExtractor

__all__ = [
    "Candidate",
    "DeterministicExtractor",
    "ExtractionFailed",
    "ExtractionFailure",
    "ExtractionResult",
    "Extractor",
    "ModelExtractor",
    "Turn",
]
