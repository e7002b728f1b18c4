"""Revision 2 of the deterministic rules (issue 24): the turn is classified first, and past
events, purchases, amounts and durations become facts. Revision 1 found none of these."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from quipu.extraction.base import Turn
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.extraction.events import turn_kind

SAID = datetime(2023, 5, 20, 14, 30, tzinfo=UTC)


def _facts(text: str, revision: int | None = None) -> list[str]:
    turns = [Turn("user", text, 1, SAID), Turn("assistant", "Sure, happy to help.", 2)]
    return [c.text for c in DeterministicExtractor(revision=revision).run(turns).candidates]


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        (
            "Yesterday I adopted a rescue dog named Biscuit from the shelter.",
            "User adopted a rescue dog named Biscuit from the shelter on 2023-05-19",
        ),
        (
            "I spent 70 hours restoring my grandfather's oak desk last year.",
            "User spent 70 hours restoring their grandfather's oak desk in 2022",
        ),
        ("I took a pottery class in March.", "User took a pottery class in March"),
        ("Since I live in Porto, which gym should I join?", "User lives in Porto"),
    ],
)
def test_issue24_past_events_amounts_and_durations_become_facts(said: str, fact: str) -> None:
    assert _facts(said, revision=1) == []
    assert _facts(said) == [fact]


@pytest.mark.parametrize(
    "said",
    [
        "I just finished watching the finale, wow",
        "I made a mistake in the report.",
        "I spent some time thinking about it.",
    ],
)
def test_issue24_conversation_chatter_is_not_an_event(said: str) -> None:
    assert _facts(said) == []


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("```python\nprint('I live in Porto')\n```", "code"),
        ("def f(x):\n    return x\nimport os\nclass A: {\n}", "code"),
        ("Pretend you are my grandmother. I love pancakes and I live in Porto.", "roleplay"),
        ("Dear [Your Name], I live at [Your Address] and I work at {company}.", "template"),
        ("The committee reviewed the proposal in detail. " * 40 + "I live in Porto.", "document"),
        ("I live in Porto and I work as a nurse.", "chat"),
    ],
)
def test_issue24_turn_is_classified_before_rules(content: str, kind: str) -> None:
    """The issue's should-not-store cases: pasted documents, code, templates, role-play."""
    assert turn_kind(content) == kind
    if kind != "chat":
        assert _facts(content) == []


def test_issue24_won_stays_past_tense() -> None:
    """A judged fact read "User wons $20 when Rich Strike took the win" (distorted)."""
    assert _facts("I won $20 when Rich Strike took the win at the Kentucky Derby.") == [
        "User won $20 when Rich Strike took the win at the Kentucky Derby"
    ]
