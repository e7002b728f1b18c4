"""Episodes: a session's words kept verbatim as retrievable memories (issue 24, CONSOL-3).

Promotion writes every user and assistant turn as one or more **episodes** beside the facts the
extractor distils: kind ``episode``, source ``promoted`` (so trust ``unverified``), dated with
the turn's ``observed_at``, and located by provenance: the session id, the turn's sequence
number and role, and the episode's character offsets in the turn (``turn_start``,
``turn_end``). The unit is the turn, cut into windows of at most :data:`EPISODE_CHARS`
characters at paragraph or sentence boundaries; a turn of fewer than
:data:`MIN_EPISODE_WORDS` words ("ok", "thanks!") carries nothing to find and is skipped.

Pure functions, plus :class:`PrefetchedEmbedder`, which embeds a promotion's texts in one batch
so writing a session costs one model call rather than one per memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from quipu.core.sessions import SessionTurn, session_fingerprint
from quipu.embeddings.base import Embedder, Vectors
from quipu.errors import EmbeddingUnavailable

#: The most characters one episode holds (a long turn is cut into several).
EPISODE_CHARS = 1500
#: A turn with fewer words than this gives no episode.
MIN_EPISODE_WORDS = 3
#: The roles whose turns become episodes (system prompts and tool output do not).
EPISODE_ROLES = ("user", "assistant")
#: Bumped whenever the episodes written for the same turns change (part of the promotion key).
EPISODES_VERSION = "episodes-1"

_WORD = re.compile(r"\w+")
_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


@dataclass(frozen=True)
class Episode:
    """One verbatim unit: ``text == turn content[start:end]``."""

    text: str
    turn_seq: int
    role: str
    start: int
    end: int
    said_at: datetime


def windows(text: str, size: int = EPISODE_CHARS) -> list[tuple[int, int]]:
    """Cut ``text`` into spans of at most ``size`` characters, at the latest paragraph,
    sentence, clause or word break past half a window; a hard cut when there is none."""
    spans: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > size:
        limit = start + size
        cut = -1
        for mark in _BREAKS:
            found = text.rfind(mark, start + size // 2, limit)
            if found != -1:
                cut = found + len(mark)
                break
        cut = cut if cut > start else limit
        spans.append((start, cut))
        start = cut
    spans.append((start, len(text)))
    return spans


def episodes_of(turns: Sequence[SessionTurn], size: int = EPISODE_CHARS) -> list[Episode]:
    """The episodes of a session's turns, in turn order; whitespace trimmed off each window
    (the offsets locate the trimmed text)."""
    out: list[Episode] = []
    for turn in turns:
        if turn.role not in EPISODE_ROLES:
            continue
        for start, end in windows(turn.content, size):
            piece = turn.content[start:end]
            lead = len(piece) - len(piece.lstrip())
            body = piece.strip()
            if len(_WORD.findall(body)) < MIN_EPISODE_WORDS:
                continue
            first = start + lead
            out.append(Episode(body, turn.seq, turn.role, first, first + len(body), turn.said_at))
    return out


def promotion_key(turns: Sequence[SessionTurn], extractor: str, episodes: bool) -> str:
    """The idempotency key of a promotion (CONSOL-4, PROMO-2): the hash of the session's window
    (order, roles, contents) with the extractor's id and version and the episode writer's
    version. An unchanged window under the same extractor is never compiled again; an extractor
    upgrade changes the key, so the session is compiled once more, and only once."""
    digest = hashlib.sha256(session_fingerprint(turns).encode())
    digest.update(f"\x1f{extractor}\x1f{EPISODES_VERSION if episodes else '-'}".encode())
    return digest.hexdigest()


class PrefetchedEmbedder(Embedder):
    """``inner``, with the vectors of ``texts`` computed up front in one batch; any other text
    goes to ``inner``. When ``inner`` is unavailable the prefetch is skipped and each write
    falls back to it (and then to a deferred embedding), as without this wrapper."""

    def __init__(self, inner: Embedder, texts: Sequence[str]) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._known: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(t for t in texts if t))
        if not unique:
            return
        try:
            vectors = inner.embed_batch(unique)
        except EmbeddingUnavailable:
            return
        self._known = {text: vectors[i] for i, text in enumerate(unique)}

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        if texts and all(t in self._known for t in texts):
            return np.stack([self._known[t] for t in texts]).astype(np.float32, copy=False)
        return self.inner.embed_batch(texts)
