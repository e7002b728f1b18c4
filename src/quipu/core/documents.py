"""The documents plane's domain (DOC-1): the text a document is read as, its chunks, and the
snippet a search answers with. Pure functions, no I/O.

**The text.** Plain text and Markdown are kept as given. HTML is read as its text
(:func:`html_text`: tags dropped, ``script``/``style`` skipped, block elements ending a line,
entities decoded); every offset of an HTML document counts characters of that text.

**The chunking rule** (:func:`chunk_spans`). The text is cut into *blocks* at blank lines; a
Markdown heading line (``#`` to ``######``) or a setext underline also starts a block. Blocks
are packed in order into segments of at most ``max_chars`` characters; a heading always starts a
new segment, so a section's text never shares a chunk with the end of the previous section. A
block longer than ``max_chars`` is cut at the last sentence end (``. ! ?`` followed by space),
else the last whitespace, else hard at ``max_chars``. The segments tile the text exactly (no
character dropped, none reordered). Each chunk is its segment plus up to ``overlap`` characters
of the one before it, starting at the first word that begins within them, unless the segment
starts a section. Chunks
are kept verbatim: ``text[start:end]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from html.parser import HTMLParser
from typing import Any

from quipu.core.records import Scope
from quipu.errors import Conflict, InvalidInput

#: Default size bound and overlap of a chunk, in characters.
MAX_CHUNK_CHARS = 1200
CHUNK_OVERLAP = 150
#: Longest document accepted in one call, in characters of its text (about 250 pages).
MAX_DOCUMENT_CHARS = 1_000_000
#: Longest range one read returns, in characters.
MAX_READ_CHARS = 20_000
#: Snippet size and the widest marked span, in characters.
SNIPPET_CHARS = 240
MARK_CHARS = 120
#: The markers around the matching span of a snippet.
MARK_OPEN, MARK_CLOSE = "\u00ab", "\u00bb"

_BLANK = re.compile(r"\n[ \t\r\f\v]*\n")
_HEADING = re.compile(r"(?m)^(?:#{1,6}[ \t]|[^\n]+\n(?:=+|-+)[ \t]*$)")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class MediaType(StrEnum):
    TEXT = "text/plain"
    MARKDOWN = "text/markdown"
    HTML = "text/html"
    PDF = "application/pdf"
    """Read as the text of its pages (:mod:`quipu.documents_pdf`, the optional ``pdf`` extra)."""


class DocumentStatus(StrEnum):
    ACTIVE = "active"
    DELETED = "deleted"
    ERASED = "erased"
    """Compliance erase: title, metadata and every chunk's text and vector are gone."""


class ChunkStatus(StrEnum):
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    """Looks like a prompt injection (SAFE-2): kept for review, never served."""
    REFUSED = "refused"
    """Holds a secret (SAFE-1): its text is not stored; only its offsets and why."""


@dataclass(frozen=True)
class Chunk:
    """One verbatim chunk: ``text`` is ``document_text[start:end]`` (empty when refused)."""

    seq: int
    start: int
    end: int
    text: str
    status: ChunkStatus = ChunkStatus.ACTIVE
    reason: str | None = None
    """Why a chunk is not served: the secret kind, or ``injection``."""


@dataclass(frozen=True)
class Document:
    """A document's record (its text lives in its chunks)."""

    id: str
    tenant_id: str
    scope: Scope
    owner: str
    title: str
    media_type: MediaType
    metadata: dict[str, Any]
    chars: int
    chunks: int
    status: DocumentStatus
    version: int
    actor: str
    surface: str
    agent_id: str | None
    recorded_at: datetime
    embedding_model: str
    reason: str | None = None
    withheld: list[dict[str, Any]] = field(default_factory=list)
    """The chunks not served: ``{seq, start, end, status, reason}``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope.value,
            "title": self.title,
            "media_type": self.media_type.value,
            "metadata": self.metadata,
            "chars": self.chars,
            "chunks": self.chunks,
            "status": self.status.value,
            "version": self.version,
            "actor": self.actor,
            "surface": self.surface,
            "agent_id": self.agent_id,
            "recorded_at": self.recorded_at.isoformat(),
            "embedding_model": self.embedding_model,
            "reason": self.reason,
            "withheld": self.withheld,
        }


def media_type(value: object) -> MediaType:
    aliases = {
        "text": MediaType.TEXT,
        "markdown": MediaType.MARKDOWN,
        "html": MediaType.HTML,
        "pdf": MediaType.PDF,
    }
    if isinstance(value, str):
        found = aliases.get(value.strip().lower())
        if found is not None:
            return found
        for kind in MediaType:
            if value.strip().lower().split(";", 1)[0] == kind.value:
                return kind
    raise InvalidInput(
        "media_type must be text/plain, text/markdown, text/html or application/pdf (or text,"
        " markdown, html, pdf)",
        code="unsupported_media_type",
        details={"field": "media_type"},
    )


# -- HTML as text -------------------------------------------------------------------------------
_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tr",
        "td",
        "th",
        "ul",
    }
)
_SKIPPED = frozenset({"script", "style", "template", "noscript", "head"})


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self.skip += 1
        elif tag in _BLOCKS:
            self.parts.append("\n\n" if tag in {"p", "h1", "h2", "h3", "h4", "h5", "h6"} else "\n")
            if tag in {"h1", "h2", "h3", "h4", "h5", "h6"}:
                self.parts.append("#" * int(tag[1]) + " ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self.skip = max(0, self.skip - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n\n" if tag in {"p", "h1", "h2", "h3", "h4", "h5", "h6"} else "\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(re.sub(r"[ \t\r\n\f\v]+", " ", data))


def html_text(html: str) -> str:
    """The text of an HTML document (see the module docstring); headings become Markdown
    headings, so the chunking rule sees them."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    text = re.sub(r"[ \t]*\n[ \t]*", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# -- chunking ------------------------------------------------------------------------------------
def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, starts_section) of the blocks tiling ``text``."""
    cuts = {0}
    cuts.update(m.end() for m in _BLANK.finditer(text))
    headings = {m.start() for m in _HEADING.finditer(text)}
    cuts.update(headings)
    ordered = sorted(c for c in cuts if c < len(text))
    out = []
    for i, start in enumerate(ordered):
        end = ordered[i + 1] if i + 1 < len(ordered) else len(text)
        out.append((start, end, start in headings))
    return out


def _cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into pieces of at most ``max_chars`` (sentence, space, hard)."""
    pieces = []
    while end - start > max_chars:
        window = text[start : start + max_chars]
        at = max((m.end() for m in _SENTENCE_END.finditer(window)), default=0)
        if at < max_chars // 3:
            at = max(window.rfind(" "), window.rfind("\n")) + 1
        if at < max_chars // 3:
            at = max_chars
        pieces.append((start, start + at))
        start += at
    pieces.append((start, end))
    return pieces


def chunk_spans(
    text: str, *, max_chars: int = MAX_CHUNK_CHARS, overlap: int = CHUNK_OVERLAP
) -> list[tuple[int, int]]:
    """The (start, end) of every chunk of ``text`` (the rule is in the module docstring)."""
    segments: list[tuple[int, int, bool]] = []
    current: tuple[int, int, bool] | None = None
    for start, end, heading in _blocks(text):
        for a, b in _cut(text, start, end, max_chars):
            fresh = heading and a == start
            if current is not None and not fresh and b - current[0] <= max_chars:
                current = (current[0], b, current[2])
                continue
            if current is not None:
                segments.append(current)
            current = (a, b, fresh)
    if current is not None:
        segments.append(current)
    spans = []
    for i, (start, end, section) in enumerate(segments):
        begin = start
        if i and not section and overlap > 0:
            floor = max(segments[i - 1][0], start - overlap)
            begin = next((at for at in range(floor, start) if _word_start(text, at)), start)
        spans.append((begin, end))
    return spans


def _word_start(text: str, at: int) -> bool:
    """Whether a word starts at ``at`` (a non-space character after a space or the start)."""
    return not text[at].isspace() and (at == 0 or text[at - 1].isspace())


# -- snippets ------------------------------------------------------------------------------------
def snippet(
    chunk: str, offset: int, matches: set[str], stem: Any
) -> tuple[str, tuple[int, int] | None]:
    """A bounded snippet of ``chunk`` (whose first character is at ``offset`` in the document)
    and the document offsets of its marked span: the densest run of words whose stems are in
    ``matches`` (``stem(word) -> key or None``), at most :data:`MARK_CHARS` wide, wrapped in
    :data:`MARK_OPEN` / :data:`MARK_CLOSE`. Without a matching word: the chunk's start, unmarked."""
    hits = [(m.start(), m.end()) for m in _WORD.finditer(chunk) if stem(m.group()) in matches]
    if not hits:
        body = chunk[:SNIPPET_CHARS].strip()
        return (body + (" \u2026" if len(chunk) > SNIPPET_CHARS else ""), None)
    best = (0, 0)
    for i, (first, _) in enumerate(hits):
        j = i
        while j + 1 < len(hits) and hits[j + 1][1] - first <= MARK_CHARS:
            j += 1
        if j - i > best[1] - best[0] or (j - i == best[1] - best[0] and i == best[0] == 0):
            best = (i, j)
    lo, hi = hits[best[0]][0], hits[best[1]][1]
    room = max(0, SNIPPET_CHARS - (hi - lo))
    left = max(0, lo - room // 2)
    right = min(len(chunk), hi + (room - (lo - left)))
    head = "\u2026 " if left > 0 else ""
    tail = " \u2026" if right < len(chunk) else ""
    shown = f"{head}{chunk[left:lo]}{MARK_OPEN}{chunk[lo:hi]}{MARK_CLOSE}{chunk[hi:right]}{tail}"
    return shown, (offset + lo, offset + hi)


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as the store holds it: its storage key and document, and its vector (float32,
    unit length) when it is served."""

    key: int
    document_id: str
    chunk: Chunk
    vector: Any = None


def check_corpus(pinned: tuple[str, int], given: tuple[str, int]) -> None:
    """Conflict ``corpus_model_mismatch`` when the corpus is pinned to another embedding model
    or dimension than the one writing or searching it (never a silently wrong answer)."""
    if pinned != given:
        raise Conflict(
            f"this scope's document corpus is embedded with {pinned[0]} ({pinned[1]} "
            f"dimensions), not {given[0]} ({given[1]}); re-index the corpus "
            "(quipu reindex --corpus) or use that model",
            code="corpus_model_mismatch",
            details={
                "corpus_model": pinned[0],
                "corpus_dimension": pinned[1],
                "model": given[0],
                "dimension": given[1],
            },
        )
