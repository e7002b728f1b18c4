"""Text normalisation, hashing and alias folding (MEM-6, RECALL-7). Pure."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_SPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    """NFKC, case-fold, collapse whitespace: the key for exact matching."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    """Hash of the normalised text: two texts that fold alike are the same memory."""
    return hashlib.sha256(fold(text).encode("utf-8")).hexdigest()


def embedding_key(text: str) -> str:
    """Hash of the exact text sent to the embedder (the embedding cache key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
