"""PDF input for the documents plane (DOC-1), with the optional ``pypdf`` package
(``pip install 'quipu[pdf]'``).

A PDF is read as its text: each page's text as :mod:`pypdf` extracts it (layout order), pages
joined by a blank line, so a page break is always a block boundary for the chunking rule; every
offset of a PDF document counts characters of that text. A file that is not a PDF, is
encrypted, or cannot be parsed is 422 ``invalid_pdf``; one larger than :data:`MAX_PDF_BYTES`
is 422 ``document_too_large``; without pypdf installed, 422 ``unsupported_media_type`` naming
the extra to install. Nothing is fetched: fonts and images are not read, only text operators.
"""

from __future__ import annotations

import base64
import binascii
import io
import logging

from quipu.core.documents import MediaType
from quipu.errors import InvalidInput

#: Largest PDF file accepted, in bytes.
MAX_PDF_BYTES = 20_000_000
#: Most pages read from one file.
MAX_PDF_PAGES = 2_000


def pdf_text(data: object) -> str:
    """The text of a PDF file given as bytes (see the module docstring)."""
    if not isinstance(data, bytes | bytearray | memoryview) or not data:
        raise InvalidInput(
            "a PDF document's content must be the file's bytes",
            code="invalid_pdf",
            details={"field": "content"},
        )
    raw = bytes(data)
    if len(raw) > MAX_PDF_BYTES:
        raise InvalidInput(
            f"the PDF is {len(raw)} bytes; the limit is {MAX_PDF_BYTES}",
            code="document_too_large",
            details={"bytes": len(raw), "limit": MAX_PDF_BYTES},
        )
    if not raw.lstrip()[:5] == b"%PDF-":
        raise _invalid("the content is not a PDF file (no %PDF- header)")
    try:
        import pypdf
        from pypdf.errors import PyPdfError
    except ImportError:
        raise InvalidInput(
            "PDF documents need the optional pypdf package: pip install 'quipu[pdf]'",
            code="unsupported_media_type",
            details={"field": "media_type", "extra": "pdf"},
        ) from None
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed input warns per object
    try:
        reader = pypdf.PdfReader(io.BytesIO(raw), strict=False)
        if reader.is_encrypted:
            raise _invalid("the PDF is encrypted")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise _invalid(f"the PDF has more than {MAX_PDF_PAGES} pages")
        pages = [page.extract_text() or "" for page in reader.pages]
    except InvalidInput:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise _invalid(f"the PDF cannot be read: {type(exc).__name__}") from None
    return "\n\n".join(p.strip("\n") for p in pages)


def pdf_media(value: object) -> bool:
    """Whether ``value`` names the PDF media type (an unknown one is left to the add)."""
    return isinstance(value, str) and value.strip().lower().split(";", 1)[0] in (
        "pdf",
        MediaType.PDF.value,
    )


def pdf_bytes(encoded: str) -> bytes:
    """A PDF sent over HTTP: the file's bytes as base64 (422 ``invalid_pdf`` otherwise)."""
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid("a PDF's content must be the file's bytes in base64") from None


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_pdf", details={"field": "content"})
