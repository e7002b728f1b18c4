"""Extraction: propose long-term memories from session turns (PROMO-3).

:class:`DeterministicExtractor` (the default) needs no model; :class:`ModelExtractor` asks
any OpenAI-compatible chat endpoint with a versioned prompt and a strict schema. Both sit
behind :class:`Extractor`, and neither writes anything: gating and storage belong to the
promotion job.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from quipu.extraction.base import (
    Candidate,
    ExtractionFailed,
    ExtractionFailure,
    ExtractionResult,
    Extractor,
    Turn,
)

if TYPE_CHECKING:
    from quipu.extraction.deterministic import DeterministicExtractor
    from quipu.extraction.model import ModelExtractor

#: Imported when first used (PEP 562): the extractors compile hundreds of patterns and the model
#: one loads an HTTP client, which a process that only recalls never needs (issue 23).
_LAZY = {
    "DeterministicExtractor": "quipu.extraction.deterministic",
    "ModelExtractor": "quipu.extraction.model",
}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)


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
