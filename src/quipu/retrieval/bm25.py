"""BM25 over one scope partition: the tokenizer and an incrementally built postings index.

Statistics (document frequency, average length) are those of the scope alone, so no other
tenant's or subject's rows influence a score or an order (SCOPE-7). Pure: no I/O.
"""

from __future__ import annotations

import math
import re
import unicodedata
from array import array
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import Stemmer

from quipu.retrieval.terms import STOPWORDS

#: A word: a run of letters and digits.
WORD = re.compile(r"[^\W_]+", re.UNICODE)
_stemmer = Stemmer.Stemmer("english")

#: Bumped whenever :func:`tokenize`, :func:`document_tokens` or :func:`indexed_keys` changes,
#: so stores recompute the keys they saved.
TOKENIZER_VERSION = "3"

#: Okapi BM25 parameters: Anserini's defaults. Short conversational turns reward a softer
#: length normalisation than the classic k1 = 1.2, b = 0.75 (measured in docs/benchmarks.md).
K1 = 0.9
B = 0.4


def tokenize(text: str) -> list[str]:
    """NFKC, case-fold, split on non-word characters, drop stop words, Snowball-stem."""
    return tokenize_many([text])[0]


def split_words(text: str) -> list[str]:
    """The words :func:`tokenize` stems: NFKC, case-folded, stop words left out."""
    text = text if text.isascii() else unicodedata.normalize("NFKC", text)
    return [w for w in WORD.findall(text.casefold()) if w not in STOPWORDS]


def tokenize_many(texts: Sequence[str]) -> list[list[str]]:
    """:func:`tokenize` for many texts, stemming them all in one call."""
    split: list[list[str]] = []
    flat: list[str] = []
    for raw in texts:
        found = split_words(raw)
        split.append(found)
        flat.extend(found)
    stemmed = _stemmer.stemWords(flat)
    out: list[list[str]] = []
    at = 0
    for words in split:
        out.append(stemmed[at : at + len(words)])
        at += len(words)
    return out


#: Words that shape a question ("how many kinds of…", "what would you recommend…") but
#: rarely occur in the memory that answers it; left out of query keys only (stemmed).
QUESTION_WORDS = frozenset(
    tokenize(
        "many much kind kinds type types sort ever also would likely might tell know "
        "recommend suggest think something anything thing things"
    )
)


def document_tokens(text: str, aliases: Sequence[str], observed_at: datetime | None) -> list[str]:
    """The BM25 keys stored for a memory: its text and aliases, plus the month name and year
    it was observed in ("may 2023"), so "what did I say in May" can match by date as well as
    by words (measured in docs/benchmarks.md)."""
    tokens = tokenize("\n".join((text, *aliases)))
    if observed_at is not None:
        tokens += tokenize(f"{observed_at.astimezone(UTC):%B %Y}")
    return tokens


def indexed_keys(own: Sequence[str], context: Sequence[str]) -> list[str]:
    """The BM25 keys a memory is stored under: its ``own`` keys, then each key of its
    ``context`` (:class:`SessionContext`) that is not among them, once.

    Context keys say what the memory is about, not how often: counted in full, a short reply
    right after a long message ("Noted: the session lifetime, 30 minutes.") held the message's
    words twice (its own and the context's) and outranked the message that said it. Presence
    alone keeps the session-level gain and lets the message itself rank first (issue 31:
    generated technical chats, turn any@1 0.475 -> 0.575, 30 questions won, 2 lost;
    docs/benchmarks.md, "Message-level benchmarks")."""
    held = set(own)
    return [*own, *(key for key in dict.fromkeys(context) if key not in held)]


class SessionContext:
    """Context keys of memories taken in write order (refreshes, bulk imports).

    A memory written in a session is also indexed under the keys of the memory written just
    before it in the same session and scope, from another family (measured in
    docs/benchmarks.md: the turn before often names what a reply only refers to). Feed rows in
    storage-key order; :meth:`seed` gives a session's latest row from before the batch.
    """

    def __init__(self) -> None:
        # session -> (family of its latest row, that row's own keys, the latest own keys of
        # another family before it)
        self._last: dict[Hashable, tuple[str, list[str], list[str]]] = {}

    def seed(self, session: Hashable, family: str, own: list[str], before: list[str]) -> None:
        self._last[session] = (family, own, before)

    def next(self, session: Hashable | None, family: str, own: list[str]) -> list[str]:
        """The context keys of this row (its own keys not included), then remember it."""
        if session is None:
            return []
        last = self._last.get(session)
        context: list[str] = [] if last is None else last[1] if last[0] != family else last[2]
        self._last[session] = (family, own, context)
        return context


def query_tokens(query: str) -> list[str]:
    """The BM25 keys of a query: :func:`tokenize` without :data:`QUESTION_WORDS`, unless that
    would leave nothing."""
    tokens = tokenize(query)
    kept = [t for t in tokens if t not in QUESTION_WORDS]
    return kept or tokens


@dataclass(frozen=True)
class PostingsArrays:
    """:class:`Postings` as plain arrays: term ``t``'s documents are ``docs[ptr[t]:ptr[t+1]]``
    with frequencies ``tfs[...]``; ``vocabulary[t]`` is its key."""

    vocabulary: list[str]
    ptr: npt.NDArray[np.int64]
    docs: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.float32]
    lengths: npt.NDArray[np.float32]
    total_length: float


class Postings:
    """Term -> (document positions, term frequencies).

    A bulk-loaded part is kept in CSR form (one array of positions sorted by term); documents
    added one by one afterwards go to small per-term arrays. Scoring reads both.
    """

    def __init__(self) -> None:
        self._vocab: dict[str, int] = {}
        self._ptr = np.zeros(1, dtype=np.int64)
        self._csr_docs = np.zeros(0, dtype=np.int32)
        self._csr_tfs = np.zeros(0, dtype=np.float32)
        self._docs: dict[int, array[int]] = {}
        self._tfs: dict[int, array[float]] = {}
        self._lengths = array("f")
        self._total_length = 0.0

    def __len__(self) -> int:
        return len(self._lengths)

    def _term(self, token: str) -> int:
        term = self._vocab.get(token)
        if term is None:
            term = self._vocab[token] = len(self._vocab)
        return term

    def add(self, position: int, tokens: Sequence[str]) -> None:
        """Index document ``position`` (positions must arrive as 0, 1, 2, ...)."""
        counts: dict[str, float] = {}
        for token in tokens:
            counts[token] = counts.get(token, 0.0) + 1.0
        self.add_counts(position, counts)

    def add_counts(self, position: int, counts: Mapping[str, float]) -> None:
        """Index document ``position`` from its term frequencies (which may be fractional:
        a weighted occurrence); its length is their sum."""
        if position != len(self._lengths):
            raise ValueError("documents must be added in position order")
        for token, count in counts.items():
            term = self._term(token)
            if term not in self._docs:
                self._docs[term] = array("i")
                self._tfs[term] = array("f")
            self._docs[term].append(position)
            self._tfs[term].append(float(count))
        length = float(sum(counts.values()))
        self._lengths.append(length)
        self._total_length += length

    def document_frequency(self, token: str) -> int:
        """How many documents hold ``token``."""
        term = self._vocab.get(token)
        return 0 if term is None else int(self._postings(term)[0].size)

    def bulk_add(self, documents: Sequence[Sequence[str]]) -> None:
        """Index documents 0..n-1 of an empty index at once (the restart path)."""
        if len(self._lengths):
            raise ValueError("bulk_add needs an empty index")
        lengths = np.fromiter((len(d) for d in documents), dtype=np.int64, count=len(documents))
        flat = [token for doc in documents for token in doc]
        for token in dict.fromkeys(flat):
            self._term(token)
        terms = np.fromiter(map(self._vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
        docs = np.repeat(np.arange(len(documents), dtype=np.int64), lengths)
        vocab = max(len(self._vocab), 1)
        pairs, counts = np.unique(terms * len(documents) + docs, return_counts=True)
        pair_terms = pairs // max(len(documents), 1)
        self._csr_docs = (pairs % max(len(documents), 1)).astype(np.int32)
        self._csr_tfs = counts.astype(np.float32)
        self._ptr = np.searchsorted(pair_terms, np.arange(vocab + 1)).astype(np.int64)
        self._lengths.extend(lengths.astype(np.float32).tolist())
        self._total_length = float(lengths.sum())

    def arrays(self) -> PostingsArrays:
        """The index as CSR arrays, the documents added one by one merged in (for a file)."""
        spans = np.diff(self._ptr)
        terms = [np.repeat(np.arange(spans.size, dtype=np.int64), spans)]
        docs, tfs = [self._csr_docs], [self._csr_tfs]
        for term, positions in self._docs.items():
            terms.append(np.full(len(positions), term, dtype=np.int64))
            docs.append(np.frombuffer(positions, dtype=np.int32))
            tfs.append(np.frombuffer(self._tfs[term], dtype=np.float32))
        all_terms, all_docs = np.concatenate(terms), np.concatenate(docs)
        order = np.lexsort((all_docs, all_terms))
        ptr = np.searchsorted(all_terms[order], np.arange(len(self._vocab) + 1))
        return PostingsArrays(
            vocabulary=list(self._vocab),
            ptr=ptr.astype(np.int64),
            docs=all_docs[order].astype(np.int32),
            tfs=np.concatenate(tfs)[order].astype(np.float32),
            lengths=np.frombuffer(self._lengths, dtype=np.float32).copy(),
            total_length=self._total_length,
        )

    @classmethod
    def from_arrays(cls, saved: PostingsArrays) -> Postings:
        """An index over ``saved``'s arrays as given (read-only ones, e.g. a mapped file, are
        only read: later documents go to the per-term arrays)."""
        out = cls()
        out._vocab = {token: i for i, token in enumerate(saved.vocabulary)}
        out._ptr, out._csr_docs, out._csr_tfs = saved.ptr, saved.docs, saved.tfs
        out._lengths.frombytes(np.ascontiguousarray(saved.lengths, dtype=np.float32).tobytes())
        out._total_length = saved.total_length
        return out

    def _postings(self, term: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        docs = np.zeros(0, dtype=np.int32)
        tfs = np.zeros(0, dtype=np.float32)
        if term + 1 < len(self._ptr):
            lo, hi = self._ptr[term], self._ptr[term + 1]
            docs, tfs = self._csr_docs[lo:hi], self._csr_tfs[lo:hi]
        if term in self._docs:
            docs = np.concatenate([docs, np.frombuffer(self._docs[term], dtype=np.int32)])
            tfs = np.concatenate([tfs, np.frombuffer(self._tfs[term], dtype=np.float32)])
        return docs, tfs

    def scores(
        self, query_tokens: Sequence[str] | Mapping[str, float]
    ) -> npt.NDArray[np.float32] | None:
        """BM25 score of every document for the query; ``None`` when no query term is known.
        A mapping gives each key a weight (its contribution is multiplied by it); a sequence
        weighs every key 1."""
        n = len(self._lengths)
        weights = (
            query_tokens if isinstance(query_tokens, Mapping) else dict.fromkeys(query_tokens, 1.0)
        )
        terms = [(self._vocab[t], w) for t, w in weights.items() if t in self._vocab and w > 0]
        if not terms or n == 0:
            return None
        lengths = np.frombuffer(self._lengths, dtype=np.float32, count=n)
        avg = self._total_length / n if self._total_length else 1.0
        norm = K1 * (1.0 - B + B * lengths / avg)
        out = np.zeros(n, dtype=np.float32)
        for term, weight in terms:
            docs, tfs = self._postings(term)
            df = docs.size
            if df == 0:
                continue
            idf = weight * math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            out[docs] += idf * tfs * (K1 + 1.0) / (tfs + norm[docs])
        return out
