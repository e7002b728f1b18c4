"""Revision 4 of the deterministic rules (issue 24, promoted-fact quality; PROMO-3, extractor
1.5): true but trivial statements are not promoted, the five distortions of 1.4 named in
docs/benchmarks.md are gone, and a few statements next to a request or a question are kept.

Every case quotes a user turn of the LongMemEval balanced subset (its source id beside it):
the trivial and distorted ones are facts judged so by hand in
tests/data/promotion_judged_facts_r3.json / _r4.json or in the draw they came from, each
stored by revision 3 (asserted, so each test is red on the rules before the fix)."""

from __future__ import annotations

import pytest

from quipu.extraction.dates import resolve_relative_dates
from quipu.extraction.rewrite import third_person
from tests.support.extraction import SAID, confident_facts

_facts = confident_facts


@pytest.mark.parametrize(
    ("said", "stored_before"),
    [
        # a duration that does not say of what (713737a2/7)
        ("I've been practicing for about three months now.", "User has been practicing"),
        # one meal's plan (20cf06b8/11, ac549598_1/1)
        ("I'm planning to make the sauce this weekend.", "User is planning to make the sauce"),
        (
            "I'm planning to make chicken parmesan again this week.",
            "User is planning to make chicken parmesan",
        ),
        # a resolution taken in reply to advice (ultrachat_155329/13, ultrachat_338813/9)
        (
            "I'm definitely going to work on setting clear goals and building strong "
            "relationships with my team.",
            "User is definitely going to work on setting clear goals",
        ),
        (
            "I'll definitely treat myself to something nice this week.",
            "User will definitely treat themselves to something nice",
        ),
        # the state of one moment (33d0e4b3_2/11, c1e598cd_1/3, 7613d5ec_2/7)
        (
            "My car is covered in a thick layer of yellow dust.",
            "User's car is covered in a thick layer of yellow dust",
        ),
        ("I'm on Season 4 Episode 5.", "User is on Season 4 Episode 5"),
        (
            "I went to a regular grocery store that day.",
            "User went to a regular grocery store that day",
        ),
        # a reaction inside the conversation (65698aa9_4/5, ultrachat_396809/7)
        (
            "My favorite part was experimenting with different angles and perspectives using "
            "my new wide-angle lens.",
            "User's favorite part was experimenting",
        ),
        ("I don't care about structure or efficiency.", "User doesn't care about structure"),
        # what "one" is, only the conversation says (answer_5ff494b9_abs/5)
        ("I visited one in the mountains during my trip.", "User visited one in the mountains"),
        # a request for help phrased as a fact (210d7fd8_2/9), a reply to a question (0a5cbc79_1/3)
        (
            "I've got a few more questions about the pastry dough.",
            "User has got a few more questions",
        ),
        (
            "I don't have any specific foot or ankle issues.",
            "User doesn't have any specific foot or ankle issues",
        ),
    ],
)
def test_issue24_true_but_trivial_facts_are_not_promoted(said: str, stored_before: str) -> None:
    assert any(t.startswith(stored_before) for t in _facts(said, revision=3))
    assert _facts(said) == []


@pytest.mark.parametrize(
    ("said", "distorted"),
    [
        # the five distortions of 1.4 (tests/data/promotion_judged_facts_r4.json)
        (
            "I love incorporating seasonal ingredients into my cooking, so as spring arrives, "
            "I start to look for recipes that feature fresh herbs.",  # 750b437b_3/11
            "User loves incorporating seasonal ingredients into their cooking, so as spring "
            "arrives",
        ),
        (
            "I spent two days in the stand, but unfortunately, I didn't see any deer within "
            "range.",  # c86a22a2_2/7
            "User spent two days in the stand, but unfortunately",
        ),
        (
            "Great, can you write me some R code? My df is called: both_debuttest3",  # MDWggeV
            "User's df is called",
        ),
        # a title with "my" in it, and a title cut at "A.I." (f6859b48_2/7, 45c29267/7)
        (
            "I've also been listening to some comedy podcasts, like \"My Brother, My Brother "
            'and Me".',
            'User has also been listening to some comedy podcasts, like "their Brother',
        ),
        (
            'I recently watched "The Age of A.I." on YouTube.',
            'User recently watched "The Age of A.they',
        ),
    ],
)
def test_issue24_known_distortions_of_1_4_are_not_promoted(said: str, distorted: str) -> None:
    assert distorted in _facts(said, revision=3)
    assert distorted not in _facts(said)


def test_issue24_a_statement_after_it_has_been_a_relief_is_not_a_correction() -> None:
    """261efbe2_2/7: "Actually, …" made "It's been a huge relief" correct the statement before
    it, and "my neighborhood" was read as "my neighbor": "User's neighbor plays been a huge
    relief". Neither the pronoun nor the fragment is stored now."""
    said = (
        "I started taking yoga classes at a new studio in my neighborhood about 6 weeks ago. "
        "Plus, he plays amazing music during the classes.\n\nActually, I've noticed a huge "
        "difference in my lower back. It's been a huge relief!"
    )
    facts = _facts(said)
    assert not any("neighbor" in t and "plays" in t for t in facts)
    assert not any("been a huge relief" in t for t in facts)


def test_issue24_verbs_bent_by_the_rewrite_are_conjugated_right() -> None:
    """8f6b938d_4/5 ("usually meals prep … and bring") and 3301f749_1/1 ("onces picked")."""
    assert (
        third_person("I usually meal prep on Sundays and bring healthy snacks to work")
        == "User usually meal-preps on Sundays and brings healthy snacks to work"
    )
    assert (
        third_person("I once picked up a first edition of The Walking Dead")
        == "User once picked up a first edition of The Walking Dead"
    )


def test_issue24_a_request_tacked_onto_a_fact_is_cut_from_it() -> None:
    """83fa816b/1 and 64b847a7_1/1: the trip is kept, the request is not."""
    said = (
        "I'm planning a trip to Tokyo in May and need help comparing prices on different airlines."
    )
    assert _facts(said) == ["User is planning a trip to Tokyo in May"]
    assert (
        resolve_relative_dates("a meal for next week", SAID) == "a meal for the week of 2023-06-05"
    )


def test_issue24_a_past_spelt_like_the_present_is_not_read_as_a_plan() -> None:
    """756a4a02_2/1: "I set up two-factor authentication … on April 5th" became "User sets up
    … on April 5th", a plan (the dated-event rule is shared by every revision)."""
    said = (
        "I set up two-factor authentication for all my online accounts, including social "
        "media, email, and banking, on April 5th"
    )
    assert not any(t.startswith("User sets up") for t in _facts(said))


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        # 58bf7951 (single-session-user): a statement with a question tacked on
        (
            "The play I attended was actually a production of The Glass Menagerie, have you "
            "heard of it?",
            "The play User attended was actually a production of The Glass Menagerie",
        ),
        # 32260d93 and 06878be2 (preference): the role opening a request
        (
            "As an aspiring stand-up comedian, I'm looking for some advice on how to improve "
            "my craft.",
            "User is an aspiring stand-up comedian",
        ),
        (
            "As a Sony camera user, I've been thinking about upgrading my camera bag to "
            "something more comfortable and durable.",
            "User is a Sony camera user",
        ),
    ],
)
def test_issue24_evidence_next_to_a_request_or_question_is_kept(said: str, fact: str) -> None:
    assert fact not in _facts(said, revision=3)
    assert fact in _facts(said)


def test_issue24_such_as_is_not_an_unresolved_reference() -> None:
    """0edc2aef (preference): revision 3 dropped this as an unresolved "such" (the pronoun
    list is shared by revisions 3 and 4)."""
    said = (
        "Besides great views, I also like hotels with unique features, such as a rooftop pool "
        "or a hot tub on the balcony."
    )
    assert _facts(said) == [
        "User also likes hotels with unique features, such as a rooftop pool or a hot tub on "
        "the balcony"
    ]


@pytest.mark.parametrize("said", ["?", "...?", 'Right. "?"', "I live in Porto. ?!"])
def test_issue24_a_question_with_no_clause_never_raises(said: str) -> None:
    """The question-tail rule read the last clause of a question sentence that had none (a
    session of the LongMemEval subset raised IndexError); the extractor never raises."""
    assert "User lives in Porto" not in _facts(said) or said.startswith("I live")


def test_issue24_it_was_actually_is_not_a_corrected_value() -> None:
    """aaf22693/11, judged distorted in version 1.3: "…, and it was actually a 5-day trip as
    well" replaced the value of the statement before it ("User has actually a 5-day trip")."""
    said = (
        "I have a week off in June. Speaking of which, I remember that last month's trip to "
        "Paris was amazing, and it was actually a 5-day trip as well."
    )
    assert not any("actually a 5-day trip" in t for t in _facts(said))


@pytest.mark.parametrize(
    "said",
    [
        "As an AI language model, I cannot browse the internet.",  # sharegpt_VAELSB3_0/7
        "As a user, I want to see my order history.",  # 32833e0b_3/11
        "We need a new logo, as a small business, I can't afford an agency.",  # ultrachat_103337/7
    ],
)
def test_issue24_a_role_lead_is_a_person_the_user_is(said: str) -> None:
    """The role-lead rule reads "As a …, I" as what the user is, never a prompt's persona, a
    story's user or a company (each was proposed by a first draft of the rule)."""
    assert not any(t.startswith("User is a") for t in _facts(said))


def test_issue24_a_curly_negation_is_not_bent_into_a_verb() -> None:
    """sharegpt_uGnQJQx_0/11: "i don\u2019t love \u201cpoodle\u201d" (curly quotes) was
    rewritten "User don\u2019ts love …"."""
    said = "i don\u2019t love \u201cpoodle\u201d as a name."
    assert not any("\u2019ts" in t for t in _facts(said))


# Written after judging the draw of 1.5 (tests/data/promotion_judged_facts_r5.json), so these
# shapes were seen in that sample; the next draw (_r6) measures them out of sample.


@pytest.mark.parametrize(
    ("said", "distorted"),
    [
        # a purpose clause read as a procedure (sharegpt_jZOf9E5_21/8, 102ff8ab/9)
        (
            "So far volunteers solicited, collected, and disbursed funds for charitable "
            "purposes to meet the goals of the organization; and to preserve, propagate and "
            "perpetuate Telugu cultural heritage in North America.",
            "To preserve: propagate and perpetuate Telugu cultural heritage in North America",
        ),
        (
            "Yeah, I meant to say I did a marathon, not a bike ride.",
            "To say: did a marathon, not a bike ride",
        ),
        # a title cut at an initial (b73a4d04_1/1)
        (
            "By the way, I also own a rare first edition of F. Scott Fitzgerald's \"The Great "
            'Gatsby", which I purchased for $2,500.',
            "User also owns a rare first edition of F",
        ),
    ],
)
def test_issue24_shapes_judged_distorted_in_the_1_5_draw(said: str, distorted: str) -> None:
    assert distorted in _facts(said, revision=3)
    assert distorted not in _facts(said)


def test_issue24_a_real_procedure_is_kept() -> None:
    said = "To rotate the staging certs, run certbot renew, restart nginx, then check the expiry."
    assert _facts(said) == [
        "To rotate the staging certs: run certbot renew, restart nginx, then check the expiry"
    ]


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        # "She loves to read" after "my sister again": "again" read as her name (cad5dca8_2/1)
        (
            "I'm planning to get a gift for my sister again, and I'm looking for some ideas. "
            "She loves to read, so I thought maybe a new book would be a great idea.",
            "User's sister again loves to read",
        ),
        # "I usually need" conjugated as a past form (f8cbf729_2/1)
        (
            "By the way, I usually need a pick-me-up around 2 pm, so I still allow myself one "
            "caffeinated coffee at that time.",
            "User usually need a pick-me-up around 2 pm",
        ),
    ],
)
def test_issue24_names_and_verbs_bent_in_the_1_5_draw(said: str, fact: str) -> None:
    """The person and verb rewrites are shared by every revision: red on the code before."""
    assert fact.replace(" again", "").replace("need a", "needs a") in _facts(said)
    assert fact not in _facts(said)
