"""Which extractor slots replace an earlier session's value (issue 24, knowledge updates)."""

from quipu.jobs.promotion import single_valued, slot_tag


def test_promo_004_single_valued_slots() -> None:
    for slot in ("live", "work", "age", "favourite:colour", "my:manager:is:NAME"):
        assert single_valued(slot), slot
    for slot in ("lived", "born", "my:sister:is:NAME", "my:dog:is:NAME", "the:plan", "named:Ana"):
        assert not single_valued(slot), slot


def test_promo_004_slot_tag_is_bounded() -> None:
    assert slot_tag("live") == "slot:live"
    long = slot_tag("my:" + "x" * 200 + ":is:NAME")
    assert long.startswith("slot:#") and len(long) <= 64
