"""Offline retrieval lab: try a scoring idea on LoCoMo and LongMemEval in seconds.

``quipu bench locomo|longmemeval`` measures the shipped pipeline end to end (minutes per run:
every turn goes through ``remember``). This script is for the step before: it embeds every
turn and question once with the bundled model (cached in ``--cache``), builds Quipu's own BM25
(``quipu.retrieval.bm25``: same tokenizer, same scoring code) over each haystack, and scores
named variants with the harness's protocol and metrics (``quipu.evals``). Variants that look
good here are then implemented and measured with ``quipu bench``; docs/benchmarks.md records
both.

    .venv/bin/python scripts/retrieval_lab.py --cache /tmp/quipu-lab            # every variant
    .venv/bin/python scripts/retrieval_lab.py --cache /tmp/quipu-lab rrf score  # some

The first run embeds ~16k turns (minutes on two cores); later runs read the cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import pickle
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import lab_signals
import numpy as np
import numpy.typing as npt

from quipu.evals.compare import sign_test
from quipu.evals.metrics import recall_all_at_k, recall_any_at_k, sessions_from_ranked_turns
from quipu.evals.public_bench import Haystack, locomo_haystacks, longmemeval_haystacks
from quipu.retrieval import bm25
from quipu.retrieval.expansion import query_keys
from quipu.retrieval.fusion import session_gain
from quipu.retrieval.temporal import query_windows
from quipu.retrieval.terms import STOPWORDS

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
FILES = {
    "locomo": ("locomo/locomo10.json", locomo_haystacks),
    "longmemeval": ("longmemeval/longmemeval_s_subset_balanced.json", longmemeval_haystacks),
}
DEPTH = 100
Scores = npt.NDArray[np.float64]


@dataclass
class Prepared:
    haystack: Haystack
    turns: npt.NDArray[np.float32]
    queries: npt.NDArray[np.float32]
    tokens: list[list[str]]
    query_tokens: list[list[str]]
    observed: list[datetime]
    prev: npt.NDArray[np.int64]
    next: npt.NDArray[np.int64]
    cache: dict[object, bm25.Postings] = field(default_factory=dict)
    session: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Index of each turn's session (0..sessions-1, first-appearance order)."""
    centroid_cache: npt.NDArray[np.float64] | None = None
    asks_cache: npt.NDArray[np.float64] | None = None
    context: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    """Vectors of each turn embedded with its context, by window (see :func:`windows`)."""
    content_queries: dict[float, npt.NDArray[np.float32]] = field(default_factory=dict)
    """Vectors of the queries' content words only, by ``content_share`` (0: see
    :func:`content_words`; above 0: see :func:`common_words_dropped`)."""
    sentences: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None = None
    """The sentences of turns with two or more (see :func:`sentences`): each one's turn index,
    and its vector."""
    signals: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    """Query × turn scores of the eighth round's signals, by name (``maxsim``, ``splade``;
    see ``lab_signals.py``)."""
    mean_cache: npt.NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        names = [t.session for t in self.haystack.turns]
        number = {name: i for i, name in enumerate(dict.fromkeys(names))}
        self.session = np.array([number[name] for name in names], dtype=np.int64)

    def documents(self, dates: bool, pairs: bool) -> list[list[str]]:
        """Each turn's BM25 keys; ``dates`` adds its session's month name and year, ``pairs``
        each pair of adjacent keys (:func:`pairs_of`)."""
        docs = [[*d, *pairs_of(d)] for d in self.tokens] if pairs else self.tokens
        if dates:
            stamps = bm25.tokenize_many([f"{at:%B %Y}" for at in self.observed])
            docs = [[*d, *s] for d, s in zip(docs, stamps, strict=True)]
        return docs

    def postings(
        self, neighbours: int = 0, dates: bool = False, pairs: bool = False
    ) -> bm25.Postings:
        """BM25 postings of the turns (or of each turn with its ``neighbours`` nearest turns
        on each side within its session); ``dates`` and ``pairs`` as in :meth:`documents`."""
        key = (int(neighbours), dates, pairs)
        if key in self.cache:
            return self.cache[key]
        docs = self.documents(dates, pairs)
        if neighbours:
            n = len(docs)
            docs = [
                [
                    token
                    for j in range(max(0, i - neighbours), min(n, i + neighbours + 1))
                    if self.session[j] == self.session[i]
                    for token in docs[j]
                ]
                for i in range(n)
            ]
        index = bm25.Postings()
        index.bulk_add(docs)
        self.cache[key] = index
        return index

    def context_postings(
        self, prev: float, nxt: float, dates: bool, pairs: bool = False
    ) -> bm25.Postings:
        """One BM25 index of each turn's own keys plus the previous (``prev``) and next
        (``nxt``) turn's keys of its session, those counted at that weight per occurrence (the
        product's context keys are ``prev`` = 1, ``nxt`` = 0)."""
        key = ("context", prev, nxt, dates, pairs)
        if key in self.cache:
            return self.cache[key]
        docs = self.documents(dates, pairs)
        index = bm25.Postings()
        for i, own in enumerate(docs):
            weights: dict[str, float] = {}
            for token in own:
                weights[token] = weights.get(token, 0.0) + 1.0
            for j, w in ((self.prev[i], prev), (self.next[i], nxt)):
                if j >= 0 and w:
                    for token in docs[j]:
                        weights[token] = weights.get(token, 0.0) + w
            index.add_counts(i, weights)
        self.cache[key] = index
        return index

    def asks(self) -> Scores:
        """Per turn, the share of its sentences that are questions (image captions left out)."""
        if self.asks_cache is None:
            shares = []
            for turn in self.haystack.turns:
                text = re.sub(r"\[image:[^\]]*\]", "", turn.text)
                ends = re.findall(
                    r"[.!?]+(?=\s|$)", text.strip() + ("" if text.strip()[-1:] in ".!?" else ".")
                )
                shares.append(sum("?" in e for e in ends) / max(len(ends), 1))
            self.asks_cache = np.array(shares)
        return self.asks_cache

    def session_postings(self) -> bm25.Postings:
        """BM25 postings with one document per session (all its turns' tokens)."""
        if "sessions" not in self.cache:
            docs: list[list[str]] = [[] for _ in range(int(self.session.max()) + 1)]
            for s, tokens in zip(self.session, self.tokens, strict=True):
                docs[s].extend(tokens)
            index = bm25.Postings()
            index.bulk_add(docs)
            self.cache["sessions"] = index
        return self.cache["sessions"]

    def mean(self) -> npt.NDArray[np.float64]:
        """Unit mean vector of every turn of the haystack."""
        if self.mean_cache is None:
            total = self.turns.astype(np.float64).sum(axis=0)
            self.mean_cache = total / np.linalg.norm(total)
        return self.mean_cache

    def centroids(self) -> npt.NDArray[np.float64]:
        """Unit mean vector of each session's turns."""
        if self.centroid_cache is not None:
            return self.centroid_cache
        sums = np.zeros((int(self.session.max()) + 1, self.turns.shape[1]))
        np.add.at(sums, self.session, self.turns.astype(np.float64))
        self.centroid_cache = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        return self.centroid_cache


#: Words of a question's form, not of its topic (stemmed like queries are); ``plain`` drops them.
QUESTION_WORDS = frozenset(
    bm25.tokenize(
        "many much kind kinds type types sort ever also would likely might tell know "
        "recommend suggest think something anything thing things"
    )
)
_SPEAKER = re.compile(r"^[^:\n]{1,40}: ")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\[image:|\n+")


def sentences(text: str) -> list[str]:
    """The sentences of a turn (an image caption counts as one) of three or more words, each
    with the turn's ``Speaker: `` label; none when the turn has fewer than two."""
    label = _SPEAKER.match(text)
    head, body = (label.group(0), text[label.end() :]) if label else ("", text)
    parts = [part.strip(" ]") for part in _SENTENCE_END.split(body)]
    parts = [part for part in parts if len(part.split()) >= 3]
    return [head + part for part in parts] if len(parts) >= 2 else []


def pairs_of(keys: list[str]) -> list[str]:
    """Adjacent BM25 keys joined (``support_group``): a phrase key for proximity."""
    return [f"{a}_{b}" for a, b in itertools.pairwise(keys) if a != b]


def common_words_dropped(text: str, index: bm25.Postings, share: float) -> str:
    """``text`` without the words whose key is in more than ``share`` of the haystack's turns
    (in a conversation, the speakers' names): a query as its distinctive words."""
    n = max(len(index), 1)
    kept = [
        word
        for word in bm25.WORD.findall(text)
        if not (keys := bm25.tokenize(word)) or index.document_frequency(keys[0]) / n <= share
    ]
    return " ".join(kept) or text


def windows(haystack: Haystack) -> tuple[list[str], list[str]]:
    """Each turn's text after its session predecessor's ("prev"), and also before its
    successor's ("both"): what a turn embedded with its context reads."""
    texts = [t.text for t in haystack.turns]
    sessions = [t.session for t in haystack.turns]
    n = len(texts)
    prev = [
        texts[i - 1] + "\n" + texts[i] if i and sessions[i - 1] == sessions[i] else texts[i]
        for i in range(n)
    ]
    both = [
        text + ("\n" + texts[i + 1] if i < n - 1 and sessions[i + 1] == sessions[i] else "")
        for i, text in enumerate(prev)
    ]
    return prev, both


def cached(path: Path, compute: Callable[[], Any]) -> Any:
    """The pickle at ``path``, computed and written first if missing."""
    if path.exists():
        return pickle.loads(path.read_bytes())
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(value))
    return value


def content_words(text: str) -> str:
    """``text`` without stop words and :data:`QUESTION_WORDS`: a question as a statement."""
    return " ".join(
        word
        for word in bm25.WORD.findall(text)
        if word.casefold() not in STOPWORDS and not set(bm25.tokenize(word)) & QUESTION_WORDS
    )


def prepare(
    name: str,
    cache: Path,
    context: bool = False,
    sentence: bool = False,
    shares: Collection[float] = (),
    signals: Collection[str] = (),
    splade_dir: Path | None = None,
) -> list[Prepared]:
    """The haystacks of ``name`` with their vectors; ``context`` also loads (or embeds, once)
    every turn's context windows (:func:`windows`) and the queries' content words,
    ``sentence`` the vectors of the turns' sentences (:func:`sentences`), and each of
    ``shares`` the queries without their common words (:func:`common_words_dropped`), and
    each of ``signals`` its query-by-turn scores (``lab_signals.py``; ``splade`` reads its
    weights from ``splade_dir``)."""
    relative, loader = FILES[name]
    haystacks = loader(DATA / relative)

    def embedder() -> Any:
        from quipu.embeddings.local import LocalEmbedder

        return LocalEmbedder()

    def plain() -> Any:
        model = embedder()
        return [
            (
                model.embed_batch([t.text for t in h.turns]),
                model.embed_batch([q.text for q in h.queries]),
            )
            for h in haystacks
        ]

    def in_context() -> Any:
        model = embedder()
        return [tuple(model.embed_batch(texts) for texts in windows(h)) for h in haystacks]

    vectors = cached(cache / f"{name}.pkl", plain)

    def content() -> Any:
        model = embedder()
        return [model.embed_batch([content_words(q.text) for q in h.queries]) for h in haystacks]

    def split() -> Any:
        model = embedder()
        out = []
        for h in haystacks:
            owners = [i for i, t in enumerate(h.turns) for _ in sentences(t.text)]
            texts = [part for t in h.turns for part in sentences(t.text)]
            out.append((np.array(owners, dtype=np.int64), model.embed_batch(texts)))
        return out

    def dropped(share: float) -> Callable[[], Any]:
        def compute() -> Any:
            model = embedder()
            out = []
            for h in haystacks:
                index = bm25.Postings()
                index.bulk_add(bm25.tokenize_many([t.text for t in h.turns]))
                texts = [common_words_dropped(q.text, index, share) for q in h.queries]
                out.append(model.embed_batch(texts))
            return out

        return compute

    contexts = cached(cache / f"{name}-context.pkl", in_context) if context else None
    contents = cached(cache / f"{name}-content.pkl", content) if context else None
    split_vectors = cached(cache / f"{name}-sentences.pkl", split) if sentence else None
    by_share = {
        share: cached(cache / f"{name}-common-{share}.pkl", dropped(share)) for share in shares
    }

    def signal(kind: str) -> Callable[[], Any]:
        if kind == "maxsim":
            return lambda: lab_signals.maxsim(haystacks)
        if splade_dir is None:
            raise SystemExit("the splade signal needs --splade DIR (see lab_signals.py)")
        return lambda: lab_signals.splade(haystacks, splade_dir)

    scores = {kind: cached(cache / f"{name}-{kind}.pkl", signal(kind)) for kind in signals}
    out = []
    for at, (haystack, (turns, queries)) in enumerate(zip(haystacks, vectors, strict=True)):
        sessions = [t.session for t in haystack.turns]
        n = len(sessions)
        out.append(
            Prepared(
                haystack,
                turns,
                queries,
                bm25.tokenize_many([t.text for t in haystack.turns]),
                bm25.tokenize_many([q.text for q in haystack.queries]),
                [t.observed_at for t in haystack.turns],
                np.array([i - 1 if i and sessions[i - 1] == sessions[i] else -1 for i in range(n)]),
                np.array(
                    [
                        i + 1 if i < n - 1 and sessions[i + 1] == sessions[i] else -1
                        for i in range(n)
                    ]
                ),
                context=dict(zip(("prev", "both"), contexts[at], strict=True)) if contexts else {},
                content_queries=({0.0: contents[at]} if contents else {})
                | {share: vectors_of[at] for share, vectors_of in by_share.items()},
                sentences=split_vectors[at] if split_vectors else None,
                signals={kind: matrices[at] for kind, matrices in scores.items()},
            )
        )
    return out


def bm25_scores(index: bm25.Postings, tokens: list[str], k1: float, b: float) -> Scores:
    saved = bm25.K1, bm25.B
    bm25.K1, bm25.B = k1, b
    try:
        scores = index.scores(tokens)
    finally:
        bm25.K1, bm25.B = saved
    return np.zeros(len(index)) if scores is None else scores.astype(np.float64)


def in_window(p: Prepared, question: int) -> Scores:
    windows = query_windows(p.haystack.queries[question].text)
    return np.array(
        [1.0 if any(w.start <= at < w.end for w in windows) else 0.0 for at in p.observed]
    )


def query_weights(text: str, plain: bool, names: float) -> dict[str, float]:
    """BM25 query terms with a weight each: 1, or ``names`` for words written with a capital
    (not the first word) or a digit; ``plain`` drops :data:`QUESTION_WORDS`."""
    weights: dict[str, float] = {}
    for at, word in enumerate(bm25.WORD.findall(text)):
        tokens = bm25.tokenize(word)
        if not tokens or (plain and tokens[0] in QUESTION_WORDS):
            continue
        special = (at > 0 and word[0].isupper()) or any(c.isdigit() for c in word)
        weight = names if special else 1.0
        weights[tokens[0]] = max(weights.get(tokens[0], 0.0), weight)
    return weights


def weighted_bm25(index: bm25.Postings, weights: dict[str, float], k1: float, b: float) -> Scores:
    """BM25 with a weight per query term (all 1: the plain score)."""
    if all(w == 1.0 for w in weights.values()):
        return bm25_scores(index, list(weights), k1, b)
    out = np.zeros(len(index))
    for token, weight in weights.items():
        out += weight * bm25_scores(index, [token], k1, b)
    return out


def unit(x: Scores) -> Scores:
    """``x`` divided by its maximum (all zeros stay zeros)."""
    top = x.max() if len(x) else 0.0
    return x / top if top > 0 else x


@dataclass(frozen=True)
class Variant:
    """A scoring recipe. Defaults are the shipped pipeline; every other field is a lever and
    its default leaves it off."""

    note: str = field(default="", compare=False)
    """One line on what the variant is, printed by ``--list``."""
    fusion: str = "score"  # score | rrf | bm25 | cosine | mnz (score x lists holding the row)
    # | maxsim | splade (that signal alone, see lab_signals.py)
    weight_text: float = 0.3
    k1: float = 0.9
    b: float = 0.4
    temporal: float = 0.2
    rrf_k: int = 60
    depth: int = DEPTH
    neighbours: float = 0.0
    """Weight of BM25 over each turn plus its session neighbours (needs a Store change)."""
    radius: int = 1
    """How many neighbours on each side that BM25 document holds."""
    session_text: float = 0.0
    """Weight of BM25 over the whole session (/ best session), added to every turn's score."""
    session_vector: float = 0.0
    """Weight of the cosine to the session's centroid, added to every turn's score."""
    session_vector_calibrated: bool = False
    """Session centroid cosine as (c - median) / (best - median) over sessions, not raw."""
    aggregate: str = ""  # "" | second | lse | sum3
    """Session aggregate over pool turns, added (x ``aggregate_weight``) to every turn of it."""
    aggregate_weight: float = 0.0
    aggregate_tau: float = 0.05
    calibrate: str = ""  # "" | median | minmax
    """Cosine as (c - ref) / (best - ref), ref = median or last of the depth list."""
    saturate: float = 0.0
    """If > 0 the keyword score is bm25 / (bm25 + saturate) instead of bm25 / best."""
    plain: bool = False
    names: float = 1.0
    dates: bool = False
    """Index each turn with its session's month name and year."""
    rocchio: float = 0.0
    """Dense pseudo-relevance feedback: q + rocchio * mean of the top ``feedback`` turns."""
    rm3: float = 0.0
    """Text feedback: weight of the ``rm3_terms`` best terms of the top ``feedback`` turns."""
    rm3_terms: int = 10
    feedback: int = 3
    feedback_sessions: bool = False
    """Take the feedback turns from distinct sessions (the best turn of each)."""
    vector_neighbours: float = 0.0
    """Cosine smoothed over the session neighbours: c + w * (c_prev + c_next) / 2."""
    context_vector: str = ""  # "" | prev | both
    """Which context-window embedding of each turn (see :func:`windows`) joins the cosine."""
    context_weight: float = 0.5
    """Cosine = (1 - w) * cosine to the turn + w * cosine to its context window."""
    question_penalty: float = 0.0
    """Subtracted x the share of a turn's sentences that are questions (they ask, not tell)."""
    vector_depth: int = 0
    """Depth of the vector list alone (0: ``depth``)."""
    feedback_depth: int = 0
    """Depth of the feedback pass's vector list (0: as the first pass)."""
    feedback_pool: bool = False
    """The feedback pass rescores only the first pass's pool (no second full vector search)."""
    restrict: Any = field(default=None, compare=False, repr=False)
    """Internal: the rows the feedback pass may score (set by ``feedback_pool``)."""
    prev_keys: float = 0.0
    """Weight of the previous turn's keys in the turn's own BM25 document (product: 1)."""
    next_keys: float = 0.0
    """Weight of the next turn's keys in the turn's own BM25 document."""
    content_query: float = 0.0
    """Query vector = unit(q + w * vector of the query's content words)."""
    expansion: float = 0.0
    """Query expansion as the product does it (``query_expansion``): the nearest words of the
    query's words from the shipped table, at this weight x their cosine."""
    content_share: float = 0.0
    """What ``content_query`` embeds: 0, the query without stop words and question-form words
    (:func:`content_words`); above 0, without the words in more than this share of the
    haystack's turns (:func:`common_words_dropped`)."""
    sentence_weight: float = 0.0
    """Cosine = (1 - w) * cosine to the turn + w * its best sentence's, for turns of two or
    more sentences (:func:`sentences`; each sentence embedded alone)."""
    pairs: float = 0.0
    """Adjacent keys as extra keys of turns and queries (:func:`pairs_of`), at this query
    weight."""

    center: float = 0.0
    """Search with the query vector minus this × the haystack's mean turn vector (a penalty
    on turns close to what every turn shares)."""
    maxsim: float = 0.0
    """Cosine = (1 - w) * cosine + w * the ``maxsim`` signal (late interaction)."""
    splade: float = 0.0
    """Keyword list = (1 - w) * BM25 / best + w * the ``splade`` signal / best."""
    splade_boost: float = 0.0
    """Fused score + this × the ``splade`` signal / its best in the pool."""
    lists: float = 0.0
    """Final = RRF (k 10) of this variant's ranking with the ``maxsim`` and ``splade``
    rankings, each of those at this weight."""

    def signals(self) -> set[str]:
        """The eighth-round signals this variant reads."""
        need = {self.fusion} & {"maxsim", "splade"}
        if self.maxsim or self.lists:
            need.add("maxsim")
        if self.splade or self.splade_boost or self.lists:
            need.add("splade")
        return need

    def scores(self, p: Prepared, q: int) -> Scores:
        if self.fusion in ("maxsim", "splade"):
            return p.signals[self.fusion][q].astype(np.float64)
        ranked = self._ranked(p, q)
        if not self.lists:
            return ranked
        out = 1.0 / (10 + _ranks(ranked))
        for kind in ("maxsim", "splade"):
            out += self.lists / (10 + _ranks(p.signals[kind][q]))
        return out

    def _ranked(self, p: Prepared, q: int) -> Scores:
        query = p.queries[q].astype(np.float64)
        if self.center:
            query = query - self.center * p.mean()
            query /= np.linalg.norm(query)
        if self.content_query:
            content = p.content_queries[self.content_share][q]
            query = query + self.content_query * content.astype(np.float64)
            query /= np.linalg.norm(query)
        weights = query_weights(p.haystack.queries[q].text, self.plain, self.names)
        if self.pairs:
            weights |= dict.fromkeys(pairs_of(list(weights)), self.pairs)
        if self.expansion:
            expanded = query_keys(p.haystack.queries[q].text, self.expansion)
            weights |= {k: w for k, w in expanded.items() if w < 1.0 and k not in weights}
        fused = self._scores(p, q, query, weights)
        if not (self.rocchio or self.rm3):
            return fused
        top = self._feedback_turns(p, fused)
        if self.rocchio:
            query = query + self.rocchio * p.turns[top].astype(np.float64).mean(axis=0)
            query /= np.linalg.norm(query)
        if self.rm3:
            weights = self._expand(p, weights, top)
        second = dataclasses.replace(self, vector_depth=self.feedback_depth or self.vector_depth)
        if self.feedback_pool:
            second = dataclasses.replace(second, restrict=fused > -1e8)
        return second._scores(p, q, query, weights)

    def _feedback_turns(self, p: Prepared, fused: Scores) -> npt.NDArray[np.int64]:
        order = np.argsort(-fused, kind="stable")
        if not self.feedback_sessions:
            return order[: self.feedback]
        _, first = np.unique(p.session[order[:100]], return_index=True)
        return order[np.sort(first)[: self.feedback]]

    def _expand(
        self, p: Prepared, weights: dict[str, float], top: npt.NDArray[np.int64]
    ) -> dict[str, float]:
        mass: dict[str, float] = {}
        for i in top:
            tokens = p.tokens[i]
            for token in tokens:
                if token not in weights:
                    mass[token] = mass.get(token, 0.0) + 1.0 / len(tokens)
        # rare terms carry the topic: weight the term mass by idf over the haystack
        index = p.postings()
        n = len(index)
        best = sorted(
            mass,
            key=lambda t: -mass[t] * math.log(1 + n / (1 + _df(index, t))),
        )[: self.rm3_terms]
        if not best:
            return weights
        scale = max(mass[t] for t in best)
        return {**weights, **{t: self.rm3 * mass[t] / scale for t in best}}

    def _scores(self, p: Prepared, q: int, query: Scores, weights: dict[str, float]) -> Scores:
        cosine = p.turns.astype(np.float64) @ query
        if self.restrict is not None:
            cosine = np.where(self.restrict, cosine, -1.0)
        if self.context_vector:
            window = p.context[self.context_vector].astype(np.float64) @ query
            cosine = (1 - self.context_weight) * cosine + self.context_weight * window
        if self.sentence_weight:
            assert p.sentences is not None
            owners, vectors = p.sentences
            best = np.full(len(cosine), -2.0)
            np.maximum.at(best, owners, vectors.astype(np.float64) @ query)
            mixed = (1 - self.sentence_weight) * cosine + self.sentence_weight * best
            cosine = np.where(best > -2.0, mixed, cosine)
        if self.maxsim:
            cosine = (1 - self.maxsim) * cosine + self.maxsim * p.signals["maxsim"][q]
        if self.vector_neighbours:
            prev = np.where(p.prev >= 0, cosine[p.prev], cosine)
            nxt = np.where(p.next >= 0, cosine[p.next], cosine)
            cosine = cosine + self.vector_neighbours * (prev + nxt) / 2
        index = (
            p.context_postings(self.prev_keys, self.next_keys, self.dates, self.pairs > 0)
            if self.prev_keys or self.next_keys
            else p.postings(dates=self.dates, pairs=self.pairs > 0)
        )
        text = weighted_bm25(index, weights, self.k1, self.b)
        if self.splade:
            sparse = p.signals["splade"][q].astype(np.float64)
            text = (1 - self.splade) * unit(text) + self.splade * unit(sparse)
        if self.neighbours:
            extra = weighted_bm25(p.postings(self.radius, self.dates), weights, self.k1, self.b)
            text = unit(text) + self.neighbours * unit(extra)
        if self.fusion == "bm25":
            return text
        if self.fusion == "cosine":
            return cosine
        by_text = np.argsort(-text, kind="stable")[: self.depth]
        by_text = by_text[text[by_text] > 0]
        by_vector = np.argsort(-cosine, kind="stable")[: self.vector_depth or self.depth]
        pool = np.union1d(by_text, by_vector)
        out = np.full(len(cosine), -1e9)
        if self.fusion == "rrf":
            fused = np.zeros(len(cosine))
            for order in (by_text, by_vector):
                fused[order] += 1.0 / (self.rrf_k + np.arange(1, len(order) + 1))
            out[pool] = fused[pool]
            return out
        keyword = np.zeros(len(cosine))
        if len(by_text):
            if self.saturate:
                keyword[by_text] = text[by_text] / (text[by_text] + self.saturate)
            else:
                keyword[by_text] = text[by_text] / text[by_text[0]]
        vector = np.full(len(cosine), cosine[by_vector[-1]])
        vector[by_vector] = cosine[by_vector]
        if self.calibrate:
            ref = (
                np.median(cosine[by_vector])
                if self.calibrate == "median"
                else cosine[by_vector[-1]]
            )
            vector = (vector - ref) / max(cosine[by_vector[0]] - ref, 1e-9)
        fused = (1 - self.weight_text) * vector + self.weight_text * keyword
        if self.fusion == "mnz":
            hits = np.zeros(len(cosine))
            hits[by_text] += 1
            hits[by_vector] += 1
            fused = fused * hits
        if self.session_text:
            sessions = bm25_scores(p.session_postings(), list(weights), self.k1, self.b)
            fused += self.session_text * unit(sessions)[p.session]
        if self.session_vector:
            near = p.centroids() @ query
            if self.session_vector_calibrated:
                ref = np.median(near)
                near = (near - ref) / max(near.max() - ref, 1e-9)
            fused += self.session_vector * near[p.session]
        if self.temporal:
            fused += self.temporal * in_window(p, q)
        if self.question_penalty:
            fused -= self.question_penalty * p.asks()
        if self.aggregate:
            fused = fused + self.aggregate_weight * self._aggregate(p, fused, pool)
        if self.splade_boost:
            sparse = p.signals["splade"][q][pool]
            fused[pool] += self.splade_boost * sparse / max(float(sparse.max()), 1e-9)
        out[pool] = fused[pool]
        return out

    def _aggregate(self, p: Prepared, fused: Scores, pool: npt.NDArray[np.int64]) -> Scores:
        """Per turn, its session's aggregate over the pool beyond the session's best turn."""
        extra = np.zeros(int(p.session.max()) + 1)
        by_session: dict[int, list[float]] = {}
        for i in pool:
            by_session.setdefault(int(p.session[i]), []).append(float(fused[i]))
        for s, values in by_session.items():
            values.sort(reverse=True)
            if self.aggregate == "second":
                extra[s] = values[1] if len(values) > 1 else 0.0
            elif self.aggregate == "sum3":
                extra[s] = sum(values[1:3])
            else:  # lse: the product's soft count of near-best turns
                extra[s] = session_gain(values, self.aggregate_tau)
        return extra[p.session]


def _ranks(scores: Scores) -> Scores:
    """Each row's rank (1 = best) under ``scores``."""
    out = np.empty(len(scores))
    out[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return out


def _df(index: bm25.Postings, token: str) -> int:
    return index.document_frequency(token)


def evaluate(
    prepared: list[Prepared], score: Callable[[Prepared, int], Scores]
) -> dict[str, float]:
    """Means over every question; the ``"all@5"`` row of each question is also kept in
    :data:`LAST_ALL5` (for ``--oracle``)."""
    rows: dict[str, list[float]] = {}
    for p in prepared:
        ids = [t.turn_id for t in p.haystack.turns]
        to_session = p.haystack.turn_to_session()
        for q, query in enumerate(p.haystack.queries):
            order = np.argsort(-score(p, q), kind="stable")[:50]
            ranked = [ids[i] for i in order]
            sessions = sessions_from_ranked_turns(ranked, to_session)
            for k in (5, 10):
                rows.setdefault(f"all@{k}", []).append(
                    recall_all_at_k(sessions, query.gold_sessions, k)
                )
            rows.setdefault("any@5", []).append(recall_any_at_k(sessions, query.gold_sessions, 5))
            rows.setdefault("turn all@5", []).append(recall_all_at_k(ranked, query.gold_turns, 5))
            rows.setdefault(f"cat {query.category.split()[0]}", []).append(
                recall_all_at_k(sessions, query.gold_sessions, 5)
            )
    LAST_ALL5[:] = rows["all@5"]
    return {name: float(np.mean(values)) for name, values in rows.items()}


#: Each question's session all@5 in the last :func:`evaluate` call.
LAST_ALL5: list[float] = []


#: The best combination found (see ``best`` below and the lab's report in the docs).
BEST = Variant(
    neighbours=1.0,
    plain=True,
    dates=True,
    aggregate="lse",
    aggregate_weight=1.0,
    aggregate_tau=0.05,
    rocchio=0.5,
    session_vector=0.2,
    note="nb + plain + dates + lse + rocchio + session vector.",
)

#: What ships now: BEST without the two levers a store cannot keep at write time (next-turn
#: neighbours, session centroids), with the previous turn's keys instead.
SHIPPED2 = dataclasses.replace(
    BEST,
    neighbours=0.0,
    session_vector=0.0,
    prev_keys=1.0,
    note="Second round as shipped: previous-turn context keys + plain + dates + lse + rocchio.",
)
#: The seventh round's focused query as the lab approximates it (the lab counts a word's share
#: over turns' own keys, the product over keys with context, hence 0.2 here for 0.4 there).
SHIPPED3 = dataclasses.replace(
    SHIPPED2,
    content_query=1.5,
    content_share=0.2,
    note="shipped2 + the focused query vector (seventh round).",
)
VARIANTS = {
    "shipped2": SHIPPED2,
    "shipped3": SHIPPED3,
    "shipped2+expansion": dataclasses.replace(
        SHIPPED2, expansion=0.3, note="shipped2 with query_expansion = 0.3 (sixth round)."
    ),
    "bm25-old": Variant(fusion="bm25", k1=1.2, b=0.75),
    "cosine": Variant(fusion="cosine"),
    "rrf-old": Variant(fusion="rrf", k1=1.2, b=0.75, temporal=0.0, depth=60),
    "rrf-new-bm25": Variant(fusion="rrf", temporal=0.0, depth=60),
    "score-a0.3-depth60-old-bm25": Variant(k1=1.2, b=0.75, temporal=0.0, depth=60),
    "score-a0.5-old-bm25": Variant(weight_text=0.5, k1=1.2, b=0.75, temporal=0.0),
    "score-a0.3-old-bm25": Variant(k1=1.2, b=0.75, temporal=0.0),
    "score-a0.3-temporal-old-bm25": Variant(k1=1.2, b=0.75),
    "shipped": Variant(note="The shipped pipeline."),
    "shipped-no-temporal": Variant(temporal=0.0),
    "shipped+neighbours": Variant(neighbours=1.0, note="+ BM25 of turn with prev/next turn."),
    # Session-level scores on top of neighbours (idea 1).
    "nb+session-text": Variant(
        neighbours=1.0, session_text=0.1, note="+ 0.1 x BM25 of the whole session / best."
    ),
    "nb+session-vector": Variant(
        neighbours=1.0, session_vector=0.2, note="+ 0.2 x cosine to the session centroid."
    ),
    "nb+session-both": Variant(
        neighbours=1.0,
        session_text=0.1,
        session_vector=0.2,
        note="+ both session-level scores above.",
    ),
    # Pseudo-relevance feedback (idea 2).
    "nb+rocchio": Variant(
        neighbours=1.0, rocchio=0.5, note="Second pass with q + 0.5 x mean of top-3 turn vectors."
    ),
    "nb+rm3": Variant(
        neighbours=1.0, rm3=0.2, note="Second pass with 10 best terms of top-3 turns at 0.2."
    ),
    "nb+second-round": Variant(
        neighbours=1.0,
        rocchio=0.5,
        rm3=0.2,
        feedback=1,
        note="Second pass with the top hit's vector (0.5) and 10 terms (0.2).",
    ),
    # Session aggregation for the distinct-session cut (idea 3).
    "nb+second-best": Variant(
        neighbours=1.0,
        aggregate="second",
        aggregate_weight=0.3,
        note="+ 0.3 x the session's second-best pool score.",
    ),
    "nb+lse": Variant(
        neighbours=1.0,
        aggregate="lse",
        aggregate_weight=1.0,
        aggregate_tau=0.05,
        note="+ soft count of the session's near-best pool turns.",
    ),
    # Fusion variants (idea 4).
    "nb+median-cosine": Variant(
        neighbours=1.0,
        calibrate="median",
        weight_text=0.5,
        note="Cosine as (c - median) / (best - median) of top 100, text 0.5.",
    ),
    "nb+minmax-cosine": Variant(
        neighbours=1.0,
        calibrate="minmax",
        weight_text=0.5,
        note="Cosine min-max over top 100, text 0.5.",
    ),
    "nb+saturated-bm25": Variant(
        neighbours=1.0, saturate=5.0, note="Keyword = bm25 / (bm25 + 5), not / best."
    ),
    "nb+mnz": Variant(neighbours=1.0, fusion="mnz", note="CombMNZ of the shipped scores."),
    # Query side (idea 5).
    "nb+plain": Variant(neighbours=1.0, plain=True, note="Drop question-form words from BM25."),
    "nb+names": Variant(
        neighbours=1.0, names=1.5, note="BM25 query weight 1.5 for capitalised words, numbers."
    ),
    "nb+content-query": Variant(
        neighbours=1.0, content_query=0.5, note="q + 0.5 x vector of the query's content words."
    ),
    # Document side (idea 6 and others).
    "nb+dates": Variant(
        neighbours=1.0, dates=True, note="Index each turn with its session's month and year."
    ),
    "nb+radius2": Variant(
        neighbours=2.0, radius=2, note="Neighbour BM25 over 2 turns each side, weight 2."
    ),
    "nb+vector-neighbours": Variant(
        neighbours=1.0, vector_neighbours=0.5, note="Cosine + 0.5 x mean cosine of prev/next."
    ),
    "nb+context-window": Variant(
        neighbours=1.0,
        context_vector="both",
        context_weight=0.5,
        note="Cosine half to the turn, half to prev+turn+next embedded together.",
    ),
    "nb+question-penalty": Variant(
        neighbours=1.0, question_penalty=0.1, note="- 0.1 x share of the turn's sentences asked."
    ),
    # Combinations.
    "query-time-only": Variant(
        plain=True,
        dates=True,
        aggregate="lse",
        aggregate_weight=1.0,
        aggregate_tau=0.05,
        note="plain + dates + lse: no new index, no second pass.",
    ),
    "best": BEST,
    "best+radius2": dataclasses.replace(
        BEST, neighbours=2.0, radius=2, note="best, neighbour BM25 over 2 turns each side x 2."
    ),
    "best+session-text": dataclasses.replace(
        BEST, session_text=0.1, note="best + 0.1 x session BM25 (LoCoMo up, LongMemEval down)."
    ),
}


def variant(spec: str) -> Variant:
    """A named variant, or ``[name/]field=value,...``: a variant with some fields changed."""
    if "=" not in spec:
        return VARIANTS[spec]
    base, _, changes = spec.rpartition("/")
    out = VARIANTS[base] if base else Variant()
    fields = {f.name: f for f in dataclasses.fields(Variant)}
    for change in changes.split(","):
        key, _, raw = change.partition("=")
        kind = type(getattr(Variant(), key)) if key in fields else None
        if kind is None:
            raise SystemExit(f"no field {key!r}")
        value = raw.lower() in ("1", "true", "yes") if kind is bool else kind(raw)
        out = dataclasses.replace(out, **{key: value})  # type: ignore[arg-type]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="Where vectors are cached.")
    parser.add_argument(
        "variants", nargs="*", help=f"Some of: {', '.join(VARIANTS)}; or [name/]field=value,..."
    )
    parser.add_argument("--list", action="store_true", help="List the named variants.")
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="Also print all@5 when each question takes the best of the variants run: the "
        "most any rule choosing among them per question could reach.",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="Also print, per variant, the questions it wins and loses at all@5 against the "
        "first variant named, with the exact sign test's p.",
    )
    parser.add_argument(
        "--splade",
        type=Path,
        metavar="DIR",
        help="splade-tiny's model.safetensors and tokenizer.json, for variants that read the "
        "splade signal (see lab_signals.py).",
    )
    args = parser.parse_args()
    if args.list:
        for name, known in VARIANTS.items():
            print(f"{name:30} {known.note}")
        return
    chosen = [variant(name) for name in args.variants or VARIANTS]
    context = any(v.context_vector or (v.content_query and not v.content_share) for v in chosen)
    sentence = any(v.sentence_weight for v in chosen)
    shares = {v.content_share for v in chosen if v.content_query and v.content_share}
    signals = set().union(*(v.signals() for v in chosen))
    data = {
        name: prepare(name, args.cache, context, sentence, shares, signals, args.splade)
        for name in FILES
    }
    print(
        f"{'variant':40} {'LoCoMo@5':>8} {'@10':>6} {'turn@5':>6} {'c1':>6} {'c2':>6} {'c3':>6} "
        f"{'c4':>6}   {'LME@5':>6} {'@10':>6} {'turn@5':>6}"
    )
    best: dict[str, npt.NDArray[np.float64]] = {}
    first: dict[str, npt.NDArray[np.float64]] = {}
    for name, v in zip(args.variants or VARIANTS, chosen, strict=True):
        paired, results = "", {}
        for dataset in FILES:
            results[dataset] = evaluate(data[dataset], v.scores)
            hits = np.array(LAST_ALL5)
            best[dataset] = np.maximum(best.get(dataset, hits), hits)
            base = first.setdefault(dataset, hits)
            won, lost = int((hits > base).sum()), int((hits < base).sum())
            paired += f"   +{won} -{lost} p={sign_test(won, lost):.2g}"
        a, b = results["locomo"], results["longmemeval"]
        print(
            f"{name:40} {a['all@5']:8.3f} {a['all@10']:6.3f} {a['turn all@5']:6.3f} "
            + " ".join(f"{a[f'cat {c}']:6.3f}" for c in "1234")
            + f"   {b['all@5']:6.3f} {b['all@10']:6.3f} {b['turn all@5']:6.3f}"
            + (paired if args.paired else ""),
            flush=True,
        )
    if args.oracle:
        print(
            f"{'oracle: best variant per question':40} {best['locomo'].mean():8.3f} "
            f"{'':>41}   {best['longmemeval'].mean():6.3f}"
        )


if __name__ == "__main__":
    main()
