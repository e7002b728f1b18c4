"""Query expansion: a query's BM25 keys plus the nearest words of its own words.

A memory and the question that should find it often name the same thing with different words
("what can I do in the evening?" against "I wind down by 9:30 at night"). The shipped table
(``data/neighbours.tsv.gz``, built by ``scripts/build_neighbours.py``) lists, for each whole word
of the bundled embedding model's vocabulary, its nearest other words when the model embeds words
alone. Recall adds the first :data:`PER_WORD` of them to the query's keys at ``weight`` times
their cosine. Query side only: stored keys do not change, so the setting applies to every
memory at once. Measured in docs/benchmarks.md (sixth round). Pure after the one-time load.
"""

from __future__ import annotations

import gzip
import importlib.resources
from collections.abc import Mapping
from functools import cache

from quipu.retrieval.bm25 import query_tokens, split_words, tokenize_many

#: Neighbours taken per query word (those whose stem is already a key are skipped).
PER_WORD = 3
#: Lowest cosine taken.
FLOOR = 0.6

Neighbours = Mapping[str, tuple[tuple[str, float], ...]]


@cache
def neighbours() -> Neighbours:
    """Word -> its neighbours' BM25 keys (stems) with their cosine, best first."""
    raw = importlib.resources.files("quipu.retrieval") / "data" / "neighbours.tsv.gz"
    lines = gzip.decompress(raw.read_bytes()).decode("utf-8").splitlines()
    words: list[str] = []
    pairs: list[list[str]] = []
    for line in lines:
        word, _, rest = line.partition("\t")
        words.append(word)
        pairs.append(rest.split())
    # stem every neighbour in one call (the table holds words, so it outlives a stemmer change)
    stems = tokenize_many([" ".join(p[0::2]) for p in pairs])
    return {
        word: tuple(zip(keys, map(float, p[1::2]), strict=True))
        for word, keys, p in zip(words, stems, pairs, strict=True)
    }


def query_keys(query: str, weight: float) -> dict[str, float]:
    """The BM25 keys of ``query`` with a weight each: 1 for its own keys
    (:func:`~quipu.retrieval.bm25.query_tokens`), ``weight`` x cosine for the neighbours of its
    words (``weight`` 0: none)."""
    keys = dict.fromkeys(query_tokens(query), 1.0)
    own = set(keys)
    if weight <= 0:
        return keys
    table = neighbours()
    distinct = list(dict.fromkeys(split_words(query)))
    for word, stems in zip(distinct, tokenize_many(distinct), strict=True):
        if not stems or stems[0] not in own:
            continue  # a question-form word left out of the keys, or not a key of its own
        taken = 0
        for key, cosine in table.get(word, ()):
            if taken == PER_WORD or cosine < FLOOR:
                break
            if key in own:
                continue
            keys[key] = max(keys.get(key, 0.0), weight * cosine)
            taken += 1
    return keys
