"""What a whole-store export carries besides memory versions (OPS-2, issue 27; the documents
plane, issue 28). Pure data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quipu.core.documents import Chunk, Document
from quipu.core.records import Principal
from quipu.core.sessions import SessionKey, SessionTurn, Watermark


@dataclass(frozen=True)
class PortableSession:
    """One session as stored: its turns in order, the subject that last wrote it (``None``
    when only a promotion watermark is left) and its promotion watermark."""

    key: SessionKey
    writer: Principal | None
    turns: tuple[SessionTurn, ...]
    watermark: Watermark | None


@dataclass(frozen=True)
class PortableDocument:
    """One document of the documents plane as stored (DOC-1, OPS-2): its record, every chunk
    (a refused one keeps only its offsets and why) with its float32 vector (``None`` unless
    served), and the model and dimension its scope's corpus is pinned to."""

    document: Document
    chunks: tuple[Chunk, ...]
    vectors: tuple[Any, ...]
    corpus: tuple[str, int]
