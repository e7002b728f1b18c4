"""The knowledge plane's search port (KNOW-1): the recall pipeline's stages
(:class:`~quipu.retrieval.pipeline.RecallPipeline`) run over one tenant's live articles.

A :class:`KnowledgeSnapshot` holds a tenant's live articles, their vectors and a BM25 index of
their titles and bodies, with the tenant's own statistics (no other tenant's articles weigh in).
It is built from the store at a write generation and reused until the next write. A
:class:`KnowledgePort` is one reader's view of a snapshot: only the articles that reader may
read and the filters allow are ever candidates, so a hidden article neither ranks nor shifts a
score beyond the shared BM25 statistics. Articles reach the pipeline as memory-shaped rows
(:func:`as_memory`); the use case maps hits back to articles by id.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from quipu.core.knowledge import ArticleVersion
from quipu.core.query import Candidate, Filters
from quipu.core.records import (
    Kind,
    MemoryVersion,
    Provenance,
    Relation,
    Scope,
    ScopeRef,
    Source,
    Status,
    Trust,
)
from quipu.core.text import content_hash, fold
from quipu.retrieval.bm25 import Postings, tokenize_many
from quipu.retrieval.expansion import query_keys
from quipu.storage.base import SearchInfo, Vector

#: Longest snippet a search row carries, in characters (never the whole body).
SNIPPET_CHARS = 280
#: Tenants whose snapshots one process keeps.
_CACHED_TENANTS = 64
#: Reader masks one snapshot keeps.
_MASKS = 256


@dataclass(frozen=True)
class KnowledgeSnapshot:
    """One tenant's live articles at one write generation, ready to search."""

    generation: int
    articles: tuple[ArticleVersion, ...]
    vectors: npt.NDArray[np.float32]
    """One row per article (zeros where it has none)."""
    has_vector: npt.NDArray[np.bool_]
    postings: Postings
    by_id: dict[str, int]
    flat: dict[int, tuple[str, str]] = field(default_factory=dict, compare=False, repr=False)
    """Each searched article's body flattened for snippets (:func:`flatten`), on first use."""
    masks: dict[Any, npt.NDArray[np.bool_]] = field(default_factory=dict, compare=False, repr=False)
    """Which articles a kind of reader with given filters may search, on first use (a use
    case keys it; the snapshot only keeps at most :data:`_MASKS` of them)."""

    @classmethod
    def build(
        cls, generation: int, rows: Sequence[tuple[ArticleVersion, Vector | None]], dim: int
    ) -> KnowledgeSnapshot:
        articles = tuple(a for a, _ in rows)
        vectors = np.zeros((len(rows), dim), dtype=np.float32)
        has = np.zeros(len(rows), dtype=bool)
        for at, (_, vector) in enumerate(rows):
            if vector is not None and vector.shape == (dim,):
                vectors[at] = vector
                has[at] = True
        postings = Postings()
        postings.bulk_add(tokenize_many([f"{a.title}\n{a.body}" for a in articles]))
        return cls(
            generation, articles, vectors, has, postings, {a.id: i for i, a in enumerate(articles)}
        )

    def snippet(self, at: int, query: str) -> str:
        """:func:`snippet` of the article at ``at``, its body flattened once per snapshot
        (flattening a long body was most of a knowledge search's time)."""
        found = self.flat.get(at)
        if found is None:
            found = self.flat[at] = flatten(self.articles[at].body)
        return snippet(self.articles[at].body, query, flat=found)

    def mask(self, key: Any, build: Callable[[], npt.NDArray[np.bool_]]) -> npt.NDArray[np.bool_]:
        """The mask kept under ``key``, else ``build()`` kept (read-only) and returned."""
        found = self.masks.get(key)
        if found is None:
            found = build()
            found.setflags(write=False)
            if len(self.masks) >= _MASKS:
                self.masks.clear()
            self.masks[key] = found
        return found


class SnapshotCache:
    """Snapshots by tenant, rebuilt when the tenant's write generation moved. Thread-safe."""

    def __init__(
        self,
        generation: Callable[[str], int],
        load: Callable[[str], tuple[int, list[tuple[ArticleVersion, Vector | None]]]],
    ) -> None:
        self._generation = generation
        self._load = load
        self.lock = threading.Lock()
        self._found: OrderedDict[str, KnowledgeSnapshot] = OrderedDict()

    def clear(self) -> None:
        """Forget every snapshot (each is rebuilt on its next use)."""
        with self.lock:
            self._found.clear()

    def get(self, tenant_id: str, dim: int) -> KnowledgeSnapshot:
        current = self._generation(tenant_id)
        with self.lock:
            found = self._found.get(tenant_id)
            if found is not None and found.generation == current:
                self._found.move_to_end(tenant_id)
                return found
        generation, rows = self._load(tenant_id)
        built = KnowledgeSnapshot.build(generation, rows, dim)
        with self.lock:
            self._found[tenant_id] = built
            self._found.move_to_end(tenant_id)
            while len(self._found) > _CACHED_TENANTS:
                self._found.popitem(last=False)
        return built


class KnowledgePort:
    """A :class:`~quipu.retrieval.pipeline.SearchPort` over the articles of ``snapshot`` for
    which ``allowed`` is true. Keys are positions in the snapshot."""

    def __init__(self, snapshot: KnowledgeSnapshot, allowed: npt.NDArray[np.bool_]) -> None:
        self.snapshot = snapshot
        self.allowed = allowed

    def vector_candidates(
        self, ref: ScopeRef, vector: Vector, flt: Filters, limit: int
    ) -> tuple[list[Candidate], SearchInfo]:
        snap = self.snapshot
        usable = self.allowed & snap.has_vector
        if not usable.any():
            return [], SearchInfo("knowledge-exact", 0)
        scores = snap.vectors @ np.asarray(vector, dtype=np.float32)
        return _top(scores, usable, limit), SearchInfo("knowledge-exact", int(usable.sum()))

    def text_candidates(
        self, ref: ScopeRef, text: str, flt: Filters, limit: int, *, expansion: float = 0.0
    ) -> tuple[list[Candidate], SearchInfo]:
        scores = self.snapshot.postings.scores(query_keys(text, expansion))
        if scores is None:
            return [], SearchInfo("knowledge-bm25", 0)
        usable = self.allowed & (scores > 0)
        return _top(scores, usable, limit), SearchInfo("knowledge-bm25", int(self.allowed.sum()))

    def key_frequencies(self, ref: ScopeRef, keys: Sequence[str]) -> tuple[int, dict[str, int]]:
        postings = self.snapshot.postings
        return len(postings), {key: postings.document_frequency(key) for key in keys}

    def exact_candidates(self, ref: ScopeRef, folded: str, text_hash: str) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
        for at, article in enumerate(self.snapshot.articles):
            if not self.allowed[at]:
                continue
            if fold(article.title) == folded:
                found.append((at, "alias"))
            elif article.content_hash == text_hash:
                found.append((at, "text"))
        return found

    def load(self, keys: Sequence[int]) -> dict[int, MemoryVersion]:
        arts = self.snapshot.articles
        return {k: as_memory(arts[k]) for k in keys if 0 <= k < len(arts) and self.allowed[k]}

    def sessions_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, str]:
        return {}  # articles are not written in sessions

    def vectors_of(self, ref: ScopeRef, keys: Sequence[int]) -> dict[int, Vector]:
        snap = self.snapshot
        return {
            k: snap.vectors[k] for k in keys if 0 <= k < len(snap.articles) and snap.has_vector[k]
        }

    def similarities(self, ref: ScopeRef, keys: Sequence[int], vector: Vector) -> dict[int, float]:
        found = self.vectors_of(ref, keys)
        query = np.asarray(vector, dtype=np.float32)
        return {k: float(v @ query) for k, v in found.items()}


def as_memory(article: ArticleVersion) -> MemoryVersion:
    """An article in the shape the pipeline ranks and filters: its title and body as the text,
    active, in the tenant partition, valid from when it was written."""
    return MemoryVersion(
        id=article.id,
        version=article.version,
        tenant_id=article.tenant_id,
        scope=Scope.TENANT,
        owner=article.tenant_id,
        project=article.project,
        text=f"{article.title}\n{article.body}",
        kind=Kind.NOTE,
        status=Status.ACTIVE,
        confidence=1.0,
        source=Source.GRADUATED if article.source == "graduated" else Source.EXPLICIT,
        trust=Trust.VERIFIED,
        tags=article.tags,
        metadata={},
        aliases=(),
        provenance=Provenance(),
        observed_at=None,
        valid_at=article.recorded_at,
        invalid_at=None,
        recorded_at=article.recorded_at,
        content_hash=article.content_hash,
        embedding_model=None,
        relation=Relation.CREATED,
        actor=article.actor,
    )


def body_hash(body: str) -> str:
    """The novelty gate's exact-duplicate key: the folded body (KNOW-2)."""
    return content_hash(body)


_SPACE = re.compile(r"\s+")


def flatten(body: str) -> tuple[str, str]:
    """``body`` with whitespace collapsed, and that case-folded (what :func:`snippet` reads)."""
    flat = _SPACE.sub(" ", body).strip()
    return flat, flat.casefold()


def snippet(
    body: str, query: str, limit: int = SNIPPET_CHARS, *, flat: tuple[str, str] | None = None
) -> str:
    """A bounded excerpt of ``body``: the window around the first query word it holds (else
    its start), whitespace collapsed, at most ``limit`` characters plus ellipses. ``flat`` is
    :func:`flatten` of ``body`` when the caller has it already."""
    flat_body, lowered = flatten(body) if flat is None else flat
    if len(flat_body) <= limit:
        return flat_body
    start = 0
    words = {w for w in re.findall(r"[^\W_]+", query.casefold()) if len(w) > 3}
    for word in sorted(words, key=lambda w: (-len(w), w)):  # the longest word first
        at = lowered.find(word)
        if at >= 0:
            start = max(0, at - limit // 4)
            break
    piece = flat_body[start : start + limit]
    return ("…" if start else "") + piece + ("…" if start + limit < len(flat_body) else "")


def _top(
    scores: npt.NDArray[np.floating], usable: npt.NDArray[np.bool_], limit: int
) -> list[Candidate]:
    """The ``limit`` best usable positions, best first, ties by position."""
    picked = np.flatnonzero(usable)
    if picked.size == 0:
        return []
    order = sorted(picked.tolist(), key=lambda k: (-float(scores[k]), k))[:limit]
    return [Candidate(int(k), float(scores[k])) for k in order]
