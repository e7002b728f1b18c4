"""What a whole-store export carries besides memory versions (OPS-2, issue 27). Pure data."""

from __future__ import annotations

from dataclasses import dataclass

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
