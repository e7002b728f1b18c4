"""The deterministic extractor's confident facts from one user turn, for the extraction tests."""

from datetime import UTC, datetime

from quipu.extraction.base import Turn
from quipu.extraction.deterministic import DeterministicExtractor

SAID = datetime(2023, 6, 1, 14, 30, tzinfo=UTC)


def confident_facts(text: str, revision: int | None = None) -> list[str]:
    """What the extractor keeps (confidence ≥ 0.5) from ``text`` said by the user at ``SAID``."""
    turns = [Turn("user", text, 1, SAID), Turn("assistant", "Sure, happy to help.", 2)]
    result = DeterministicExtractor(revision=revision).run(turns)
    return [c.text for c in result.candidates if c.confidence >= 0.5]
