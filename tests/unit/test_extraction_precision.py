"""Revision 3 of the deterministic rules (issue 24, promoted-fact quality; PROMO-3): a doubtful
candidate is dropped rather than stored distorted. Each case is a shape judged distorted, or
wrongly stored, in the hand-judged sample of revision 2 (tests/data/promotion_judged_facts.json)
or in the LongMemEval sessions it was drawn from; revision 2 stored each of them."""

from __future__ import annotations

import pytest

from quipu.extraction.deterministic import VERSION, DeterministicExtractor
from quipu.extraction.rewrite import third_person
from tests.support.extraction import confident_facts

_facts = confident_facts


@pytest.mark.parametrize(
    ("said", "distorted"),
    [
        # a relative clause cut from its noun
        (
            "I love my new Sony lens, which I received on February 10th.",
            "User received on February 10th",
        ),
        (
            "I want to try Reels, which I learned about in a webinar I attended recently.",
            "User learned about in a webinar they attended recently",
        ),
        # an object left behind
        (
            "I watched online during the Sundance Film Festival.",
            "User watched online during the Sundance Film Festival",
        ),
        # no verb
        ("For my denser non-fiction books.", "User's denser non-fiction books for"),
        # an aside read as a preference
        (
            "Like I mentioned earlier, yoga has been really helpful for my anxiety.",
            "User likes they mentioned earlier, yoga has been really helpful for their anxiety",
        ),
        # a clause cut before its end
        (
            "I have been working in the tech industry for a",
            "User has been working in the tech industry for a",
        ),
        # a placeholder left in a template
        ("I have a [phone model] and I use it daily.", "User has a [phone model"),
    ],
)
def test_issue24_fragments_are_dropped(said: str, distorted: str) -> None:
    assert distorted in _facts(said, revision=2)
    assert distorted not in _facts(said)
    assert _facts(said) in ([], ["User loves their new Sony lens"])


@pytest.mark.parametrize(
    "said",
    [
        "We raised over $10,000 that night, mostly from the auction and ticket sales.",
        "We manage our climate risks in line with the TCFD recommendations.",
    ],
)
def test_issue24_unnamed_we_is_not_the_users_family_or_team(said: str) -> None:
    assert any(f.startswith(("User's family", "User's team")) for f in _facts(said, revision=2))
    assert _facts(said) == []


def test_issue24_we_named_in_the_clause_is_kept() -> None:
    assert _facts("My wife and I adopted a rescue dog last month.") == [
        "User adopted a rescue dog in May 2023"
    ]


@pytest.mark.parametrize(
    "said",
    [
        "I think I'll go with the quinoa salad jars.",
        "I think I'll stick with Stripe.",
        "I like the variety of genres you've provided.",
        "I like those strategies.",
        "I never realized how impactful music education could be.",
        "I appreciate the suggestion to allocate more time for editing on Friday.",
        "I've been doing some research.",
    ],
)
def test_issue24_conversation_local_choices_and_reactions_are_dropped(said: str) -> None:
    assert _facts(said, revision=2) != []
    assert _facts(said) == []


@pytest.mark.parametrize(
    "said",
    [
        "I've even made them at home a few times.",
        "I attended a guided tour there a while back.",
        "I'm actually planning to do some hikes in this new campsite.",
        "My current one is really taking a toll on my back.",
        "I think I'll use the same yarn for the beanie.",
        "My friend has one.",
    ],
)
def test_issue24_unresolved_references_are_dropped(said: str) -> None:
    assert _facts(said, revision=2) != []
    assert _facts(said) == []


def test_issue24_pronoun_read_as_the_last_person_is_dropped() -> None:
    said = "My mom is a nurse. She often feels overwhelmed with everything she needs to do."
    assert len(_facts(said, revision=2)) == 2
    assert _facts(said) == ["User's mom is a nurse"]


def test_issue24_one_off_instruction_is_not_a_standing_preference() -> None:
    assert _facts("Write perfect English.", revision=2) != []
    assert _facts("Write perfect English.") == []
    assert _facts("Please always reply in British English.") == [
        "User wants the assistant to always reply in British English"
    ]


@pytest.mark.parametrize(
    "turn",
    [
        "Please write a comprehensive reply to the given query. I love hiking in the Alps.",
        "Game state: I have finished the granary, started on the water mill, 9 turns left.",
        "You are a helpful travel assistant. I live in Lisbon and I love trains.",
        "Argue for the motion. I don't care about protecting others.",
    ],
)
def test_issue24_task_turns_give_no_facts(turn: str) -> None:
    assert _facts(turn, revision=2) != []
    assert _facts(turn) == []


def test_issue24_durable_facts_still_pass() -> None:
    turn = (
        "I recently purchased a 1960s Canon rangefinder camera on eBay. I'm a big fan of the "
        "Chicago Cubs. My income is around $4,000 per month."
    )
    assert _facts(turn) == [
        "User recently purchased a 1960s Canon rangefinder camera on eBay",
        "User is a big fan of the Chicago Cubs",
        "User's income is around $4,000 per month",
    ]


def test_issue24_past_spelt_like_present_keeps_its_tense() -> None:
    assert third_person("I recently set a personal best") == "User recently set a personal best"
    assert third_person("I set goals every week") == "User sets goals every week"
    assert third_person("I overslept and missed my bus") == "User overslept and missed their bus"


def test_issue24_relative_span_with_a_half_is_not_resolved_as_a_date() -> None:
    said = "I just finished a Star Wars marathon, watched all the films in a week and a half."
    assert _facts(said) == [
        "User just finished a Star Wars marathon, watched all the films in a week and a half"
    ]


def test_issue24_version_bumped_so_promotion_reruns_sessions_once() -> None:
    assert VERSION == "1.5"
    assert DeterministicExtractor().version == "1.5"
    assert DeterministicExtractor(revision=2).version == "1.5-r2"


@pytest.mark.parametrize(
    ("said", "distorted"),
    [
        # judged in the sample of 1.3 (tests/data/promotion_judged_facts_r3.json)
        (
            "My close friend Rachel got engaged last month on May 15th.",
            "User's close friend Rachel got engaged in May 2023 on May 15th",
        ),
        ("I have been using a cheap one.", "User has been using a cheap one"),
        (
            "I have a few more questions about Girl & the Goat.",
            "User has a few more questions about Girl & the Goat",
        ),
        (
            "I'm planning to make sushi for dinner tonight.",
            "User is planning to make sushi for dinner on the night of 2023-06-01",
        ),
    ],
)
def test_issue24_distortions_judged_in_version_1_3_are_dropped(said: str, distorted: str) -> None:
    assert distorted in _facts(said, revision=2)
    assert _facts(said) == []


def test_issue24_hyphenated_verb_keeps_its_tense() -> None:
    assert third_person("I binge-watched The Great") == "User binge-watched The Great"
