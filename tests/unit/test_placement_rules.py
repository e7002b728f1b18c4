"""The placement decision alone (issue 26, GRAPH-2), with no store: the rules a contract test
cannot easily reach through the extractor."""

from __future__ import annotations

from quipu.core.graph import Extraction, FactDraft, Mention
from quipu.core.placement import GRAPH_TENANT_GRANT, PlacedType, Policy, decide, retype
from quipu.core.records import Principal, Role, Scope, Status
from quipu.core.scopes import TENANT_WRITE_GRANT

POLICY = Policy(1, (PlacedType("service", "tenant", ("Checkout API",)),))
WRITER = Principal(
    "t", "k", Role.AGENT, agent_id="a", grants=frozenset({TENANT_WRITE_GRANT, GRAPH_TENANT_GRANT})
)


def test_graph_2_a_name_typed_two_ways_in_one_text_stays() -> None:
    """GRAPH-2 consistent typing: the same name typed two ways within the text is doubt."""
    fact = (FactDraft(0, "hosted_in", 1),)
    both = Extraction(
        (Mention("Acme", "service"), Mention("Berlin", "place"), Mention("acme", "organisation")),
        fact,
    )
    decision = decide(POLICY, WRITER, Scope.AGENT, Status.ACTIVE, both, {})
    assert (decision.place, decision.check) == (False, "consistent_typing")
    one = Extraction(
        (Mention("Acme", "service"), Mention("Berlin", "place"), Mention("acme", "other")), fact
    )
    assert decide(POLICY, WRITER, Scope.AGENT, Status.ACTIVE, one, {}).place


def test_graph_2_subjects_are_the_facts_subjects_when_there_are_facts() -> None:
    """GRAPH-2 declared type: with facts, their subjects decide (an object of another type does
    not); without, every entity named must be of a placed type; dates never count."""
    text = Extraction(
        (Mention("Checkout API", "other"), Mention("Berlin", "place"), Mention("2024", "date")),
        (FactDraft(0, "hosted_in", 1),),
    )
    placed = decide(POLICY, WRITER, Scope.AGENT, Status.ACTIVE, retype(text, POLICY), {})
    assert placed.place and placed.subjects == ("Checkout API",)
    bare = Extraction(text.mentions)
    kept = decide(POLICY, WRITER, Scope.AGENT, Status.ACTIVE, retype(bare, POLICY), {})
    assert (kept.place, kept.check, kept.details["off"]) == (False, "declared_type", ["Berlin"])


def test_graph_2_first_person_words_keep_it_private() -> None:
    """GRAPH-2 not the profile: "I", "me", "my" keep a text private; "Iceland" does not."""
    names = retype(Extraction((Mention("Checkout API", "other"),)), POLICY)
    for text, place in (
        ("Checkout API is down.", True),
        ("I saw Checkout API fail.", False),
        ("Checkout API paged MY phone.", False),
        ("Checkout API runs in Iceland.", True),
    ):
        got = decide(POLICY, WRITER, Scope.AGENT, Status.ACTIVE, names, {}, text)
        assert got.place is place, text
