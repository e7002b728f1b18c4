"""What whole-batch harvest extraction buys over per-span extraction (issue 24, HARVEST-1).

Cases are hand-labelled windows of LoCoMo dialogues (``tests/data/harvest_coref_cases.json``:
ids and labels only; the text is read from the dataset at run time) in which a She/He sentence
of the last span refers to someone an earlier span named. Each case is extracted twice with
the same extractor the harvest uses:

- **whole batch**: every span of the window in one run, as :class:`quipu.harvest.Harvester`
  does;
- **per span**: each span alone, as an inline per-span extraction would.

A case is **resolved** when a fact extracted from the pronoun span names the referent although
the quote it came from does not (the name came from another span). The report gives both
rates, the paired table and an exact two-sided McNemar p-value over the discordant pairs.

Run: ``python -m quipu.evals.harvest_batching --locomo ../shared/data/locomo/locomo10.json``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quipu.extraction.base import Candidate, Extractor, Turn
from quipu.extraction.deterministic import DeterministicExtractor

LABELS = Path(__file__).resolve().parents[3] / "tests" / "data" / "harvest_coref_cases.json"


@dataclass(frozen=True)
class Case:
    """One labelled window: its spans (role, text) and which span holds the reference."""

    case_id: str
    spans: tuple[tuple[str, str], ...]
    pronoun: int
    referent: tuple[str, ...]


def resolved(found: Sequence[Candidate], case: Case) -> bool:
    """Whether a fact from the pronoun span names the referent its own quote does not."""
    for c in found:
        if c.turn_seq != case.pronoun:
            continue
        text, quote = c.text.casefold(), c.quote.casefold()
        if any(r.casefold() in text and r.casefold() not in quote for r in case.referent):
            return True
    return False


def whole_batch(extractor: Extractor, case: Case) -> bool:
    turns = [Turn(role, text, i) for i, (role, text) in enumerate(case.spans)]
    return resolved(extractor.run(turns).candidates, case)


def per_span(extractor: Extractor, case: Case) -> bool:
    found: list[Candidate] = []
    for i, (role, text) in enumerate(case.spans):
        found.extend(extractor.run([Turn(role, text, i)]).candidates)
    return resolved(found, case)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / float(1 << n)
    return min(1.0, 2 * tail)


def compare(extractor: Extractor, cases: Sequence[Case]) -> dict[str, Any]:
    """Both modes on every case, paired."""
    rows = [
        (case.case_id, whole_batch(extractor, case), per_span(extractor, case)) for case in cases
    ]
    both = sum(1 for _, w, s in rows if w and s)
    batch_only = sum(1 for _, w, s in rows if w and not s)
    span_only = sum(1 for _, w, s in rows if s and not w)
    n = len(rows)
    return {
        "cases": n,
        "whole_batch": round(sum(w for _, w, _ in rows) / n, 3) if n else 0.0,
        "per_span": round(sum(s for _, _, s in rows) / n, 3) if n else 0.0,
        "paired": {
            "both": both,
            "batch_only": batch_only,
            "span_only": span_only,
            "neither": n - both - batch_only - span_only,
        },
        "mcnemar_p": round(mcnemar_exact(batch_only, span_only), 4),
        "resolved_by_batch": [cid for cid, w, _ in rows if w],
    }


def locomo_cases(locomo: Path, labels: Path = LABELS) -> list[Case]:
    """The labelled windows with their text read from LoCoMo."""
    spec = json.loads(labels.read_text(encoding="utf-8"))
    data = json.loads(locomo.read_text(encoding="utf-8"))
    conversations = {c["sample_id"]: c["conversation"] for c in data}
    out: list[Case] = []
    for label in spec["cases"]:
        conv: Mapping[str, Any] = conversations[label["sample_id"]]
        session = label["pronoun"].split(":")[0][1:]
        turns = conv[f"session_{session}"]
        ids = [t["dia_id"] for t in turns]
        first, last = ids.index(label["first"]), ids.index(label["pronoun"])
        speaker = turns[last]["speaker"]
        spans = tuple(
            ("user" if t["speaker"] == speaker else "assistant", str(t["text"]))
            for t in turns[first : last + 1]
        )
        out.append(Case(label["id"], spans, last - first, tuple(label["referent"])))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, required=True, help="locomo10.json")
    parser.add_argument("--labels", type=Path, default=LABELS)
    args = parser.parse_args(argv)
    cases = locomo_cases(args.locomo, args.labels)
    report = compare(DeterministicExtractor(), cases)
    print(json.dumps({"extractor": "deterministic", **report}, indent=2))


if __name__ == "__main__":
    main()
