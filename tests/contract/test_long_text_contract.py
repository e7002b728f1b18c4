"""A memory over the text limit is refused, and the refusal names the path that keeps it
(issue 31, long messages): the same text is then stored as a document, verbatim, and found."""

from __future__ import annotations

import pytest

from quipu.core.records import Principal
from quipu.documents import DocumentService
from quipu.errors import InvalidInput
from quipu.memories import LONG_TEXT, MemoryService

TRACE_LINE = '  File "/srv/app/views.py", line {n}, in handler\n    return render(request)\n'


def _trace(lines: int) -> str:
    body = "".join(TRACE_LINE.format(n=n) for n in range(lines))
    return "Traceback (most recent call last):\n" + body + "KeyError: 'session_token_expiry'\n"


def test_issue31_a_long_paste_is_refused_with_the_path_that_keeps_it(
    service: MemoryService, alice: Principal
) -> None:
    trace = _trace(400)  # ~30 KB, over the 16 KiB memory limit
    with pytest.raises(InvalidInput) as refused:
        service.remember(alice, trace)
    error = refused.value
    assert error.code == "text_too_long"
    assert error.details["instead"] == LONG_TEXT
    assert "document_add" in error.message
    assert service.list(alice).items == []  # nothing half-written

    docs = DocumentService(service)
    try:
        added = docs.add(alice, trace, title="a pasted stack trace")
        assert added["chunks"] > 1
        found = docs.search(alice, "KeyError session_token_expiry", k=3)
        rows = found["results"]
        assert rows, found
        top = rows[0]
        text = docs.read(alice, top["document_id"], start=top["start"], end=top["end"])["text"]
        assert "session_token_expiry" in text and text == trace[top["start"] : top["end"]]
    finally:
        docs.close()
