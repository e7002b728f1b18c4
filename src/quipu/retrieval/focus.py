"""Focused query: the query without the words most of a scope's memories hold.

In a personal scope the user's own name is in nearly every memory ("Zara: just got back from
the supermarket"), so a question that names them ("Where is Zara based?") is close to every
short memory at once, and the dense search ranks chit-chat above the memory that answers it.
A word that most memories hold tells the search nothing about which memory is meant: BM25
already gives such a word almost no idf, and this module does the same for the vector. Recall
embeds the query a second time without those words and searches with
``query + focus_weight * focused`` (unit length). When no word is that common, or every word
is, the query is searched as it is and nothing more is embedded. Measured in
docs/benchmarks.md (seventh round). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from quipu.retrieval.bm25 import WORD, tokenize_many
from quipu.retrieval.vectors import Vector, toward

#: A word is only common when at least this many memories hold it as well as more than the
#: share: in a scope of a few memories one mention is already a large share.
COMMON_FLOOR = 10


def word_keys(query: str) -> list[tuple[str, str | None]]:
    """Each word of ``query`` as written, in order, with its BM25 key (``None``: a stop word,
    which has none)."""
    words = WORD.findall(query)
    return [
        (word, keys[0] if keys else None)
        for word, keys in zip(words, tokenize_many(words), strict=True)
    ]


def focused_query(
    query: str, rows: int, frequencies: Mapping[str, int], *, share: float
) -> str | None:
    """``query``'s words without those whose key more than ``share`` of the scope's ``rows``
    (and at least :data:`COMMON_FLOOR`) hold, by ``frequencies`` (key -> memories holding it);
    stop words stay. ``None`` when no word is left out, or no key is left in."""
    limit = max(share * rows, COMMON_FLOOR - 1)
    words = word_keys(query)
    kept = [(word, key) for word, key in words if key is None or frequencies.get(key, 0) <= limit]
    if len(kept) == len(words) or all(key is None for _, key in kept):
        return None
    return " ".join(word for word, _ in kept)


def mix(query: Vector, focused: Vector, weight: float) -> Vector:
    """``query + weight * focused`` scaled to unit length (``query`` if that is zero)."""
    moved = toward(query, focused, weight)
    return query if moved is None else moved
