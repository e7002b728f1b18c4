"""Multi-hop recall through topic links between memories (issue 26, setting ``topic_weight``).
Pure.

The entity graph (:mod:`quipu.retrieval.graph_signal`) links memories by who and what they
*name*. LoCoMo's multi-hop misses are not linked that way: of 159 questions the defaults miss,
3 have a specific entity of the query in every missing session; the rest share with the query
only the speaker, a hub (docs/benchmarks.md). What the sessions share is what they are *about*
-- painting, a camping trip, an adoption agency -- and that shows in their distinctive words.

This module treats each distinctive word as a topic node: a memory links to the topic nodes of
the words its keyword index holds, and a word is *distinctive* in a scope when at least
:data:`MIN_ROWS` and at most ``topic_share`` of the scope's memories hold it (a word in more
says nothing about any one memory, like a hub entity; a word in one links nothing). The walk is
the same two steps of personalised PageRank as the entity signal, over the memory-topic-memory
graph:

1. **Seeds.** The first :data:`SEED_ROWS` rows of the fused ranking, each weighted by its fused
   score over the top score.
2. **Memory -> topic.** Each seed spreads its weight evenly over its distinctive words that
   the query does not already hold (those are BM25's own work). A word reached from several
   seeds gathers their weight: it is the topic the first hits share. The best
   :data:`TOPIC_WORDS` words are kept.
3. **Topic -> memory.** The store's own keyword index does this step: a BM25 search for the
   kept words reaches the memories holding them, a rarer word (higher idf) passing more to each,
   a memory holding several of them more.

Each reached row's BM25 score over the best one's, times ``topic_weight``, is added to its fused
score before the session aggregate (the seeds themselves gain nothing from their own words);
a row the first pass did not find joins the candidates with its cosine to the query. Measured
in docs/benchmarks.md ("Multi-hop through topic links"); explained in docs/graph.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from quipu.retrieval.bm25 import tokenize_many
from quipu.retrieval.focus import word_keys

#: Rows of the first ranking that seed the walk.
SEED_ROWS = 5
#: Distinctive words kept as the query's topic (a bound on the second keyword search).
TOPIC_WORDS = 8
#: A word held by fewer memories links nothing.
MIN_ROWS = 2
#: A word held by more memories is not distinctive whatever the share: each would get under
#: 1/200 of its weight, and the lookup grows with the scope (docs/benchmarks.md, 100k scope).
MAX_ROWS = 200
#: Keep only words reached from at least this many seeds (1: every seed's words).
MIN_SEEDS = 1
#: Rows the signal may add to the candidates, best first.
NEW_ROWS = 50


def seed_weights(fused: Sequence[tuple[int, float, tuple[str, ...]]]) -> dict[int, float]:
    """The first :data:`SEED_ROWS` rows, each weighted by its score over the top score."""
    top = fused[:SEED_ROWS]
    best = max((score for _, score, _ in top), default=0.0)
    if best <= 0:
        return {key: 1.0 for key, _, _ in top}
    return {key: max(score, 0.0) / best for key, score, _ in top}


def seed_words(texts: Mapping[int, str]) -> dict[int, dict[str, str]]:
    """Each seed's BM25 keys, each with the first word that gave it (stop words left out)."""
    out: dict[int, dict[str, str]] = {}
    for key, text in texts.items():
        words: dict[str, str] = {}
        for word, stem in word_keys(text):
            if stem is not None and not stem.isdigit():
                words.setdefault(stem, word)
        out[key] = words
    return out


def limit(rows: int, share: float) -> int:
    """The most memories a word may be held by and still be distinctive
    (:data:`MIN_ROWS`..:data:`MAX_ROWS`)."""
    return min(MAX_ROWS, max(MIN_ROWS, int(rows * share)))


@dataclass(frozen=True)
class Topic:
    """Steps 1 and 2 of the walk: the kept words best first, the weight each gathered, and
    what each seed put into each (a row gains nothing back from its own weight)."""

    words: tuple[str, ...] = ()
    mass: dict[str, float] = field(default_factory=dict)
    given: dict[tuple[int, str], float] = field(default_factory=dict)


def topic(
    seeds: Mapping[int, float],
    words: Mapping[int, Mapping[str, str]],
    query: str,
    rows: int,
    frequencies: Mapping[str, int],
    share: float,
) -> Topic:
    """The words the seeds spread the most weight to, best first: each seed's distinctive
    keys not in ``query`` share its weight evenly; ties go to the rarer word. Words are named
    by the first spelling a seed used (a keyword search for it reaches its key)."""
    asked = set(tokenize_many([query])[0])
    most = limit(rows, share)
    mass: dict[str, float] = {}
    reached: dict[str, int] = {}
    spelled: dict[str, str] = {}
    given: dict[tuple[int, str], float] = {}
    for key, weight in seeds.items():
        own = words.get(key, {})
        kept = [s for s in own if s not in asked and MIN_ROWS <= frequencies.get(s, 0) <= most]
        for stem in kept:
            word = spelled.setdefault(stem, own[stem])
            part = weight / len(kept)
            mass[word] = mass.get(word, 0.0) + part
            given[(key, word)] = part
            reached[word] = reached.get(word, 0) + 1
    ranked = sorted(
        (word for word in mass if reached[word] >= MIN_SEEDS),
        key=lambda word: (-mass[word], frequencies.get(_stem(word), 0), word),
    )[:TOPIC_WORDS]
    return Topic(tuple(ranked), {w: mass[w] for w in ranked}, given)


def spread(walk: Topic, holders: Mapping[str, Sequence[int]]) -> dict[int, float]:
    """Step 3: each kept word passes its weight evenly to the memories holding it
    (``holders``, from the keyword index), except what a row put in itself; each row's share
    over the best row's (0..1], rows reached by nothing absent."""
    score: dict[int, float] = {}
    for word in walk.words:
        rows = holders.get(word, ())
        total = walk.mass.get(word, 0.0)
        for key in rows:
            gained = total - walk.given.get((key, word), 0.0)
            if gained > 0:
                score[key] = score.get(key, 0.0) + gained / len(rows)
    best = max(score.values(), default=0.0)
    if best <= 0:
        return {}
    return {key: value / best for key, value in score.items()}


def gains(scores: Mapping[int, float], weight: float) -> dict[int, float]:
    """``weight`` times each row's share: what the fused score of a row gains."""
    return {key: weight * value for key, value in scores.items() if value > 0}


def _stem(word: str) -> str:
    keys = tokenize_many([word])[0]
    return keys[0] if keys else word


def new_rows(scores: Mapping[int, float], known: set[int]) -> list[int]:
    """The best :data:`NEW_ROWS` rows the signal reached that the first pass did not find."""
    fresh = sorted(
        ((key, value) for key, value in scores.items() if key not in known),
        key=lambda item: (-item[1], item[0]),
    )
    return [key for key, _ in fresh[:NEW_ROWS]]
