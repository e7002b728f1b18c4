"""PDF documents (issue 28, DOC-1) with the optional ``pypdf`` extra, on every backend: a PDF
written by the test (never fetched) is read as its pages' text, every word of every page comes
back in order, chunks are verbatim slices of that text and search points into it; over HTTP the
file travels as base64; a file that is not a PDF, a truncated or encrypted one, and bad base64
are 422 with stable codes, nothing stored."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from quipu.core.records import Principal
from quipu.documents import DocumentService
from quipu.documents_pdf import pdf_bytes, pdf_text
from quipu.errors import InvalidInput
from quipu.memories import MemoryService

pytest.importorskip("pypdf")

PAGES = [
    [
        "Pump manual, chapter one.",
        "Unpack the pump and check the seals.",
        "The red valve must face upward before you connect the hose.",
    ],
    [
        "Chapter two: maintenance.",
        "Replace the filter every 90 days (or sooner in dusty rooms).",
        "Clean the impeller with warm water; never use solvents.",
    ],
    ["Chapter three: storage.", "Store the pump between 5 and 30 degrees Celsius."],
]


def make_pdf(pages: list[list[str]]) -> bytes:
    """A small valid PDF: one Helvetica text line per entry, with a correct xref table."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    kids = []
    for lines in pages:
        shown = b" T* ".join(
            b"("
            + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
            + b") Tj"
            for line in lines
        )
        stream = b"BT /F1 11 Tf 14 TL 72 720 Td " + shown + b" ET"
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            b" /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)


def test_doc_001_pdf_text_keeps_every_word_in_order() -> None:
    """The measure of "extracts text reliably": on generated PDFs of 1 to 3 pages, the words
    read back equal the words written, in order, and pages end at blank lines."""
    for count in (1, 2, 3):
        text = pdf_text(make_pdf(PAGES[:count]))
        assert _words(text) == _words(" ".join(" ".join(p) for p in PAGES[:count]))
        assert text.count("\n\n") == count - 1


def test_doc_001_a_pdf_document_is_chunked_and_searched(
    service: MemoryService, alice: Principal
) -> None:
    docs = DocumentService(service)
    added = docs.add(alice, make_pdf(PAGES), title="Pump manual (PDF)", media_type="pdf")
    document = added["document"]
    assert document["media_type"] == "application/pdf" and added["refused"] == []
    text = pdf_text(make_pdf(PAGES))
    assert document["chars"] == len(text)
    read = docs.read(alice, document["id"])
    assert read["text"] == text  # offsets count characters of the pages' text
    hit = docs.search(alice, "how often is the filter replaced?", k=1)["results"][0]
    assert hit["document_id"] == document["id"]
    assert "filter" in text[hit["start"] : hit["end"]]
    docs.close()


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"plain bytes, not a PDF", "invalid_pdf"),
        (make_pdf(PAGES)[:200], "invalid_pdf"),
        (b"%PDF-1.4\n" + b"\x00" * 64, "invalid_pdf"),
        ("a str is not a file", "invalid_pdf"),
        (b"", "invalid_pdf"),
        (b"%PDF-" + b"0" * 20_000_001, "document_too_large"),
    ],
    ids=["not-pdf", "truncated", "garbage", "str", "empty", "huge"],
)
def test_safe_005_a_broken_pdf_is_refused(
    service: MemoryService, alice: Principal, content: Any, code: str
) -> None:
    docs = DocumentService(service)
    with pytest.raises(InvalidInput) as refused:
        docs.add(alice, content, title="Broken", media_type="application/pdf")
    assert refused.value.code == code
    assert docs.list(alice)["items"] == []
    docs.close()


def test_safe_005_an_encrypted_pdf_and_bad_base64_are_refused() -> None:
    import io

    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf(PAGES))))
    writer.encrypt("secret-password")
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(InvalidInput) as refused:
        pdf_text(out.getvalue())
    assert refused.value.code == "invalid_pdf"
    assert pdf_bytes(base64.b64encode(b"%PDF-").decode()) == b"%PDF-"
    with pytest.raises(InvalidInput) as bad:
        pdf_bytes("not base64 at all!")
    assert bad.value.code == "invalid_pdf"
