"""The focused query (docs/benchmarks.md, seventh round): which words a recall leaves out of
its second query vector, and how the two vectors mix."""

from __future__ import annotations

import numpy as np
import pytest

from quipu.retrieval.focus import COMMON_FLOOR, focused_query, mix, word_keys


def test_word_keys_keep_every_word_as_written_with_its_key() -> None:
    assert word_keys("Where is Zara based?") == [
        ("Where", None),
        ("is", None),
        ("Zara", "zara"),
        ("based", "base"),
    ]


def test_a_word_most_memories_hold_is_left_out() -> None:
    # "zara" is in 150 of 200 memories (the user's own name), "base" in 3
    assert (
        focused_query("Where is Zara based?", 200, {"zara": 150, "base": 3}, share=0.2)
        == "Where is based"
    )


def test_the_share_is_a_strict_bound() -> None:
    frequencies = {"zara": 40, "base": 3}
    assert focused_query("Where is Zara based?", 200, frequencies, share=0.2) is None
    assert focused_query("Where is Zara based?", 200, frequencies, share=0.19) == "Where is based"


def test_a_small_scope_needs_the_floor_of_memories() -> None:
    """In 12 memories one mention is 8 %: a word is common only once COMMON_FLOOR hold it."""
    below = {"zara": COMMON_FLOOR - 1, "base": 1}
    assert focused_query("Where is Zara based?", 12, below, share=0.2) is None
    at = {"zara": COMMON_FLOOR, "base": 1}
    assert focused_query("Where is Zara based?", 12, at, share=0.2) == "Where is based"


def test_nothing_to_focus_when_no_key_would_be_left() -> None:
    assert focused_query("Zara?", 200, {"zara": 150}, share=0.2) is None
    assert focused_query("Where is Zara?", 200, {"zara": 150}, share=0.2) is None  # stop words
    assert focused_query("", 200, {}, share=0.2) is None


def test_mix_is_unit_length_and_weighted() -> None:
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    focused = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    mixed = mix(query, focused, 2.0)
    assert mixed.dtype == np.float32
    assert float(np.linalg.norm(mixed)) == pytest.approx(1.0, rel=1e-6)
    assert mixed.tolist() == pytest.approx([1 / np.sqrt(5), 2 / np.sqrt(5), 0.0], rel=1e-6)
    assert mix(query, -query, 1.0).tolist() == query.tolist()  # nothing left: the query
