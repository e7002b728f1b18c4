"""The clause a statement rule reads and what it finds there. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from quipu.core.records import Kind

__all__ = ["Finding", "Statement", "canonical"]


@dataclass(frozen=True)
class Finding:
    kind: Kind
    confidence: float
    text: str
    slot: str | None = None
    value: str | None = None
    #: A statement of what no longer holds ("I don't live in Toronto anymore"): it names
    #: what the next statement supersedes and is kept only when nothing follows.
    retraction: bool = False


@dataclass(frozen=True)
class Statement:
    """A cleaned clause: ``body`` (original case) and ``canon`` (for matching)."""

    body: str
    canon: str
    we_as: str = "User's team"


_CONTRACTIONS = [
    (r"\bi'm\b", "i am"),
    (r"\bi've\b", "i have"),
    (r"\bi'd\b", "i would"),
    (r"\bi'll\b", "i will"),
    (r"\bwe're\b", "we are"),
    (r"\bwe've\b", "we have"),
    (r"\bwe'll\b", "we will"),
    (r"\bwe'd\b", "we would"),
    (r"\bcan't\b|\bcannot\b", "can not"),
    (r"\bwon't\b", "will not"),
    (r"\b(\w+)n't\b", r"\1 not"),
    (r"\bgonna\b", "going to"),
    (r"\bwanna\b", "want to"),
    (r"\bgotta\b", "got to"),
    (r"\bkinda\b", "kind of"),
    (r"\b(it|that|there|what|he|she|name)'s\b", r"\1 is"),
    (r"\bthey're\b", "they are"),
]
_CONTRACTION_PATTERNS = [(re.compile(p), r) for p, r in _CONTRACTIONS]


_FILLER_ADVERBS = re.compile(
    r"\b(?:really|absolutely|totally|honestly|genuinely|truly|definitely|seriously|literally"
    r"|personally|actually|just|also|still|super|so much|kind of|sort of)\b ?"
)


def canonical(text: str) -> str:
    """Lower case, quotes straightened, contractions expanded, filler adverbs dropped."""
    out = text.replace("’", "'").replace("‘", "'").lower()
    for pattern, repl in _CONTRACTION_PATTERNS:
        out = pattern.sub(repl, out)
    out = _FILLER_ADVERBS.sub("", out)
    return re.sub(r"\s+", " ", out).strip()
