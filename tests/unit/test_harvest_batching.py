"""The batching measurement of issue 24 (HARVEST-1): the hand labels are well formed, the
scorer counts a reference as resolved only when the name came from another span, and the
paired comparison and its exact McNemar p-value are right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from quipu.evals.harvest_batching import (
    LABELS,
    Case,
    compare,
    locomo_cases,
    mcnemar_exact,
    per_span,
    whole_batch,
)
from quipu.extraction.deterministic import DeterministicExtractor

# shared/ sits beside the checkout (and at /work/shared on a developer's machine)
_FOUND = [
    d / "locomo" / "locomo10.json"
    for d in (Path(__file__).resolve().parents[3] / "shared" / "data", Path("/work/shared/data"))
    if (d / "locomo" / "locomo10.json").is_file()
]
LOCOMO = _FOUND[0] if _FOUND else Path("locomo10.json")


def test_harvest_1_labels_are_hand_labels_only() -> None:
    spec = json.loads(LABELS.read_text(encoding="utf-8"))
    cases = spec["cases"]
    assert len(cases) >= 20 and len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        assert set(c) == {"id", "sample_id", "first", "pronoun", "referent", "note"}
        assert re.fullmatch(r"D\d+:\d+", c["first"]) and re.fullmatch(r"D\d+:\d+", c["pronoun"])
        assert c["first"].split(":")[0] == c["pronoun"].split(":")[0]  # one session
        assert c["referent"] and all(isinstance(r, str) and r for r in c["referent"])


def test_harvest_1_whole_batch_resolves_what_per_span_cannot() -> None:
    case = Case(
        "own",
        (
            ("user", "My sister Ana is a nurse."),
            ("assistant", "Nice!"),
            ("user", "She moved to Porto."),
        ),
        2,
        ("sister",),
    )
    extractor = DeterministicExtractor()
    assert whole_batch(extractor, case) and not per_span(extractor, case)
    alone = Case("alone", (("user", "My sister Ana moved to Porto."),), 0, ("sister",))
    assert not whole_batch(extractor, alone)  # named in its own quote: not a cross-span hit
    report = compare(extractor, [case, alone])
    assert report["paired"] == {"both": 0, "batch_only": 1, "span_only": 0, "neither": 1}
    assert (report["whole_batch"], report["per_span"]) == (0.5, 0.0)


def test_harvest_1_exact_mcnemar() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(9, 0) == pytest.approx(2 / 2**9)
    assert mcnemar_exact(3, 3) == 1.0


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo is read from ../shared/data only")
def test_harvest_1_locomo_windows_load_with_the_reference_in_a_user_span() -> None:
    cases = locomo_cases(LOCOMO)
    assert len(cases) >= 20
    for case in cases:
        assert case.pronoun == len(case.spans) - 1 and case.spans[case.pronoun][0] == "user"
        assert re.search(r"\b(She|He|she|he)\b", case.spans[case.pronoun][1])
