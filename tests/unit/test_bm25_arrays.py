"""BM25 postings written out as arrays and read back (issue 23: the scope index file) score
every query exactly as the index they came from, and keep growing afterwards."""

from __future__ import annotations

import numpy as np

from quipu.retrieval.bm25 import Postings

DOCS = [
    ["dana", "window", "seat"],
    ["sam", "oat", "milk", "milk"],
    ["deploy", "fail", "tuesday"],
    ["hike", "lake", "may", "dana"],
]
LATER = [["dana", "flight", "lisbon"], ["new", "term", "milk"]]
QUERIES = [["dana"], ["milk", "oat"], ["flight"], ["term", "seat", "unknown"], ["new"]]


def _scores(postings: Postings) -> list[list[float] | None]:
    out: list[list[float] | None] = []
    for q in QUERIES:
        found = postings.scores(q)
        out.append(None if found is None else found.tolist())
    return out


def test_issue23_postings_arrays_round_trip_exactly() -> None:
    built = Postings()
    built.bulk_add(DOCS)
    for i, doc in enumerate(LATER, start=len(DOCS)):
        built.add(i, doc)  # per-term arrays beside the bulk-loaded part
    saved = built.arrays()
    for array in (saved.ptr, saved.docs, saved.tfs, saved.lengths):
        array.setflags(write=False)  # as a mapped file gives them
    restored = Postings.from_arrays(saved)
    assert _scores(restored) == _scores(built)
    assert len(restored) == len(built) and restored.document_frequency("milk") == 2
    built.add(len(DOCS) + len(LATER), ["milk", "flight"])
    restored.add(len(DOCS) + len(LATER), ["milk", "flight"])
    assert _scores(restored) == _scores(built)
    assert np.array_equal(restored.arrays().docs, built.arrays().docs)
