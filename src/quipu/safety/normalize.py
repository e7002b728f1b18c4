"""Text folding shared by the secret and injection screens.

Screens match ASCII patterns, so text is folded first: NFKC (full-width and mathematical
letters become plain ones), zero-width, soft-hyphen and bidi control characters dropped,
and common look-alike letters (Cyrillic, Greek) mapped to Latin. ``fold`` keeps a map from
the folded text back to the original, so a finding still names a span of what the caller
sent and scrubbing removes the obfuscated characters with the secret.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["INVISIBLE", "LOOKALIKES", "Folded", "fold"]

#: Characters that render as nothing (zero-width, joiners, soft hyphen, bidi controls,
#: variation selectors, Hangul fillers): dropped before matching.
INVISIBLE: dict[int, None] = dict.fromkeys(
    [
        *(0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x3164, 0xFEFF, 0xFFA0),
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2070),
        *range(0xFE00, 0xFE10),
    ]
)

#: One letter to one letter, so offsets in a mapped copy still match the text.
LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁԛԝАВЕНІЈКМОРСТХЅԌαεικορτυνχΑΒΕΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdqwABEHIJKMOPCTXSGaeikoptuvxABEHIKMNOPTYX",
)

_FOLD_TABLE: dict[int, int | None] = {**LOOKALIKES, **INVISIBLE}
_NON_ASCII = re.compile(r"[^\x00-\x7f]++")


@dataclass(frozen=True)
class Folded:
    """Folded text plus the map back to the original.

    ``pieces`` holds one ``(folded_start, original_start, folded_length, original_length)``
    per run: unchanged runs have equal lengths and map position by position; a changed
    character maps as a whole (any position inside it maps to its start or its end).
    """

    text: str
    original_length: int
    pieces: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def identity(self) -> bool:
        return not self.pieces

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of the folded span ``[start, end)`` (``start < end``)."""
        if not self.pieces:
            return start, end
        return self._start(start), self._end(end)

    def _piece(self, position: int) -> tuple[int, int, int, int]:
        i = bisect_right(self.pieces, (position, 1 << 62)) - 1
        return self.pieces[max(i, 0)]

    def _start(self, position: int) -> int:
        if position >= len(self.text):
            return self.original_length
        fold_start, orig_start, fold_len, orig_len = self._piece(position)
        if fold_len == orig_len:
            return orig_start + position - fold_start
        return orig_start

    def _end(self, position: int) -> int:
        fold_start, orig_start, fold_len, orig_len = self._piece(position - 1)
        if fold_len == orig_len:
            return orig_start + position - fold_start
        return orig_start + orig_len


def _fold_char(char: str) -> str:
    if ord(char) in INVISIBLE:
        return ""
    return unicodedata.normalize("NFKC", char).translate(_FOLD_TABLE)


def fold(text: str) -> Folded:
    """Fold ``text`` for matching; pure ASCII (the common case) costs one check."""
    if text.isascii():
        return Folded(text, len(text))
    parts: list[str] = []
    pieces: list[tuple[int, int, int, int]] = []
    folded_len = 0
    last = 0

    def keep(start: int, end: int) -> None:
        nonlocal folded_len
        if end > start:
            parts.append(text[start:end])
            pieces.append((folded_len, start, end - start, end - start))
            folded_len += end - start

    for run in _NON_ASCII.finditer(text):
        keep(last, run.start())
        chunk = run[0]
        if unicodedata.is_normalized("NFKC", chunk) and chunk.translate(_FOLD_TABLE) == chunk:
            keep(run.start(), run.end())
        else:
            for offset, char in enumerate(chunk):
                out = _fold_char(char)
                if out == char:
                    keep(run.start() + offset, run.start() + offset + 1)
                elif out:
                    parts.append(out)
                    pieces.append((folded_len, run.start() + offset, len(out), 1))
                    folded_len += len(out)
        last = run.end()
    keep(last, len(text))
    folded = "".join(parts)
    if folded == text:
        return Folded(text, len(text))
    return Folded(folded, len(text), tuple(pieces))
