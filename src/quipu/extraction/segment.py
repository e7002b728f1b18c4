"""Split a turn into sentences and clauses, keeping exact offsets. Pure.

Every piece is a :class:`Span` whose ``text`` equals ``content[start:end]`` of the turn, so
a candidate's quote can always be located in its turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Span", "clauses", "sentences", "strip_span"]

_MAX_CLAUSE_CHARS = 600


@dataclass(frozen=True)
class Span:
    text: str
    start: int
    end: int

    @property
    def question(self) -> bool:
        return self.text.rstrip(" \t\"')]»”’").endswith("?")


_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "vs",
        "etc",
        "eg",
        "e.g",
        "ie",
        "i.e",
        "approx",
        "inc",
        "ltd",
        "jr",
        "sr",
        "no",
        "fig",
        "dept",
        "ave",
        "est",
    ]
)
# A sentence ends at . ! ? (then a space or the end), a semicolon, or a line break.
_BOUNDARY = re.compile(r"[.!?]+[\"')\]»”’]*(?=\s|$)|;|\n+")
_WORD_BEFORE = re.compile(r"([A-Za-z.]+)$")


def _trimmed(content: str, start: int, end: int) -> Span | None:
    while start < end and content[start].isspace():
        start += 1
    while end > start and content[end - 1].isspace():
        end -= 1
    if start >= end:
        return None
    return Span(content[start:end], start, end)


def sentences(content: str) -> list[Span]:
    """The sentences of ``content``, each with its closing punctuation."""
    out: list[Span] = []
    start = 0
    for match in _BOUNDARY.finditer(content):
        if match.group().startswith("."):
            word = _WORD_BEFORE.search(content, 0, match.start())
            if word and word.group(1).lower().rstrip(".") in _ABBREVIATIONS:
                continue
        span = _trimmed(content, start, match.end())
        if span is not None:
            out.append(span)
        start = match.end()
    tail = _trimmed(content, start, len(content))
    if tail is not None:
        out.append(tail)
    return out


_SUBJECT = r"(?:i|i'm|i've|i'd|i'll|we|we're|we've|we'll|we'd|my|our|now\s+i|now\s+we|now\s+i'm)\b"
_SPLITS = [
    # parentheses hold a statement of their own ("my book club (we meet on Thursdays)")
    re.compile(r"\s*[()]\s*"),
    # a comma before a standing instruction ("I can't stand tabs, use 2 spaces")
    re.compile(
        r",\s+(?=(?:please |always |never |don't |do not )?(?:use|keep|make|write|answer|respond"
        r"|reply|show|give|format|call me|include|add|avoid|stick to)\b)",
        re.IGNORECASE,
    ),
    # a participle clause with a time adverb ("..., currently running 50 km a week")
    re.compile(r",\s+(?=(?:currently|now|still|usually|mostly) \w+ing\b)", re.IGNORECASE),
    # spaced dashes always separate statements
    re.compile(r"\s+(?:—|–|--|-)\s+"),
    # a colon followed by a space ("Quick note: my dentist ...")
    re.compile(r":\s+"),
    # a conjunction that starts a new first-person statement
    re.compile(
        r",?\s+(?:and|but|so|because|since|though|although|while|whereas|plus)\s+(?="
        + _SUBJECT
        + ")",
        re.IGNORECASE,
    ),
    # a conjunction that starts a statement about someone or something else
    re.compile(
        r",?\s+(?:and|but)\s+(?=(?:he|she|they|it|he's|she's|they're|it's|the\s+\w+(?:\s+\w+)?"
        r"\s+(?:is|are|was|were|will))\b)",
        re.IGNORECASE,
    ),
    # a comma followed by a new subject ("I hate cilantro, it tastes like soap")
    re.compile(
        r",\s+(?=(?:it|it's|that's|they|they're|they've|he|she|he's|she's)\s+\w)", re.IGNORECASE
    ),
    # a comma followed by a first-person subject ("I'm Dana, I live in Lisbon")
    re.compile(r",\s+(?=" + _SUBJECT + ")", re.IGNORECASE),
    # a consequence or a reason clause ("..., so please don't ...", "... since they ...")
    re.compile(
        r",?\s+(?:so|since|because|which)\s+(?!much\b|many\b|far\b|that\b|long\b|as\b)",
        re.IGNORECASE,
    ),
]
_STEPS = re.compile(
    r"^(?:(?:for future reference|fyi|note|also)[,:]?\s+)?(?:to|in order to)\s+"
    r"(?!be\b|me\b|my\b|clarify\b|sum\b|recap\b)\w+[^.!?]*?(?:,|\bthen\b)[^.!?]*(?:,|\bthen\b)",
    re.IGNORECASE,
)
_EDGE = " \t\r\n,;:.!?—–-\"'()[]«»“”‘’*_"


def strip_span(content: str, start: int, end: int) -> Span | None:
    """``content[start:end]`` without surrounding spaces and punctuation, or None if empty."""
    while start < end and content[start] in _EDGE:
        start += 1
    while end > start and content[end - 1] in _EDGE:
        end -= 1
    if start >= end:
        return None
    return Span(content[start:end], start, end)


def clauses(content: str, sentence: Span) -> list[Span]:
    """The clauses of one sentence of ``content``, in order, with offsets into ``content``."""
    if sentence.end - sentence.start > _MAX_CLAUSE_CHARS * 4:
        return []
    if _STEPS.match(sentence.text):  # "To deploy, we run X, then Y": one procedure
        whole = strip_span(content, sentence.start, sentence.end)
        return [] if whole is None else [whole]
    cuts: set[tuple[int, int]] = set()
    for pattern in _SPLITS:
        for match in pattern.finditer(content, sentence.start, sentence.end):
            cuts.add((match.start(), match.end()))
    pieces: list[Span] = []
    start = sentence.start
    for cut_start, cut_end in sorted(cuts):
        if cut_start < start:
            continue
        span = strip_span(content, start, cut_start)
        if span is not None:
            pieces.append(span)
        start = cut_end
    span = strip_span(content, start, sentence.end)
    if span is not None:
        pieces.append(span)
    return [p for p in pieces if p.end - p.start <= _MAX_CLAUSE_CHARS]
