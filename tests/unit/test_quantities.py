"""Quantity slots (issue 24, knowledge updates; ``extraction.quantities``): the old and the new
statement of one measured attribute share a key, different attributes never do. The quoted
statements are the users' own, from LongMemEval knowledge-update sessions."""

from __future__ import annotations

import pytest

from quipu.extraction.quantities import quantity_slot, sentence_quantity

SAME_ATTRIBUTE = [
    (  # 945e3d21 (tuning half)
        "I've been doing yoga twice a week, which has really been helping me relax and focus",
        "Oh, and I've noticed that I'm more focused on days when I attend yoga classes, "
        "which is three times a week",
        "q:freq:yoga",
    ),
    (  # 2698e78f_abs (tuning half)
        "I have a therapy session with Dr. Smith coming up soon - it's every two weeks",
        "I see Dr. Smith every week, and she's been helping me work on this stuff",
        "q:freq:smith",
    ),
    (  # f685340e_abs (tuning half)
        "reminds me of my own weekly tennis sessions with friends",
        "I'm planning to play tennis with my friends at the local park this Sunday, "
        "like we do every other week",
        "q:freq:tennis",
    ),
    (  # 830ce83f (tuning half; "She moved to Chicago" after "my friend Rachel")
        "My friend Rachel moved to Chicago",
        "My friend Rachel actually just moved back to the suburbs again",
        "q:home:friend rachel",
    ),
    ("I currently have three bikes", "I'll actually have four bikes with me", "q:count:bike"),
    (
        "I got pre-approved for $350,000 from Wells Fargo",
        "remember when I got pre-approved for $400,000 from Wells Fargo?",
        "q:amount:pre-approved",
    ),
    (
        "I set a personal best time in a charity 5K run with a time of 27:12",
        "My personal best in the 5K is now 25:50",
        "q:best:5k",
    ),
]


@pytest.mark.parametrize(("old", "new", "key"), SAME_ATTRIBUTE)
def test_issue24_old_and_new_statement_share_the_key(old: str, new: str, key: str) -> None:
    assert quantity_slot(old) == key
    assert quantity_slot(new) == key


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("My sister has two kids", "My brother has two kids"),
        ("I play tennis every week", "I play table tennis every week"),
        ("My personal best in the 5K is 24:10", "My personal best in the marathon is 3:58:20"),
        ("I see Dr. Smith every week", "I see Dr. Johnson every week"),
        ("I have two cats", "I have two dogs"),
        ("My sister moved to Lyon", "My brother moved to Lyon"),
    ],
)
def test_issue24_near_misses_never_share_a_key(one: str, other: str) -> None:
    assert quantity_slot(one) is not None and quantity_slot(other) is not None
    assert quantity_slot(one) != quantity_slot(other)


@pytest.mark.parametrize(
    "text",
    [
        "I bought three shirts",  # an event, not a running total
        "I've spent around 5-6 hours on it so far",  # what "it" is is not said here
        "I hope to beat my personal best time of 25:50",  # which race is not named
        "The weather was nice",
    ],
)
def test_issue24_no_key_without_a_named_attribute(text: str) -> None:
    assert quantity_slot(text) is None


def test_issue24_a_personal_best_takes_its_race_from_earlier_in_the_turn() -> None:
    before = "I'm training for another charity 5K run coming up. By the way, "
    assert quantity_slot("I'm hoping to beat my personal best time of 25:50", before) == "q:best:5k"


def test_issue24_a_frequency_stated_across_clauses_is_one_fact() -> None:
    said = (
        "Oh, and I've noticed that I'm more focused on days when I attend yoga classes, which "
        "is three times a week - it really helps me clear my head."
    )
    assert sentence_quantity(said) == (
        "User attends yoga classes three times a week",
        "q:freq:yoga",
    )
    assert sentence_quantity(
        "And by the way, I have a therapy session with Dr. Smith coming up soon - it's every "
        "two weeks, so I'm looking forward to discussing my progress with her."
    ) == ("User has a therapy session with Dr. Smith every two weeks", "q:freq:smith")
    assert sentence_quantity("If I attend yoga classes three times a week, will it help?") is None
    # 0ddfec37_abs (tuning half): the count is said of "my collection" in another clause
    old = sentence_quantity(
        "By the way, I just got a signed baseball of his last week and it's a great addition to "
        "my collection - that's 15 autographed baseballs since I started collecting three "
        "months ago!"
    )
    assert old == ("User's collection has 15 autographed baseballs", "q:count:autographed baseball")
    new = "I've added 20 autographed baseballs to my collection in the past few months"
    assert quantity_slot(new) == "q:count:autographed baseball"
