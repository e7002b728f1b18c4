"""Promoted facts drawn at random for judging by hand (issue 24), and the rates of a judged file.

The pool is every candidate at the promotion gate (confidence ≥ 0.5) that the deterministic
extractor proposes for the user turns of each distinct session of a LongMemEval file, each
session read on its own as promotion reads it; the sample is ``random.Random(seed).sample``
of the pool sorted by (source, text). ``source`` is ``longmemeval/<session id>/<turn seq>``.

``python -m quipu.evals.fact_sample FILE [--revision N] [--n 160] [--seed 24]`` prints the
sample as JSON lines; ``python -m quipu.evals.fact_sample --rates LABELS.json`` prints the
rates of a judged file (``tests/data/promotion_judged_facts*.json``), each share with its
95 % Wilson interval (``ci95``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from quipu.evals.datasets import load_longmemeval
from quipu.extraction.base import Turn
from quipu.extraction.deterministic import DeterministicExtractor

__all__ = ["LABELS", "candidate_pool", "rates", "sample", "wilson"]

LABELS = ("faithful_durable", "faithful_trivial", "distorted", "should_not_store")
GATE = 0.5


def candidate_pool(path: Path, *, revision: int | None = None) -> list[dict[str, Any]]:
    """Every candidate at the gate, one extractor run per distinct session."""
    extractor = DeterministicExtractor(revision=revision)
    sessions: dict[str, list[Turn]] = {}
    for question in load_longmemeval(path):
        for session in question.sessions:
            if session.session_id in sessions:
                continue
            sessions[session.session_id] = [
                Turn(t.role, t.content, seq, session.observed_at)
                for seq, t in enumerate(session.turns, start=1)
            ]
    pool = []
    for sid, turns in sessions.items():
        for c in extractor.run(turns).candidates:
            if c.confidence >= GATE:
                pool.append(
                    {
                        "source": f"longmemeval/{sid}/{c.turn_seq}",
                        "kind": c.kind.value,
                        "text": c.text,
                        "quote": c.quote,
                    }
                )
    return sorted(pool, key=lambda f: (f["source"], f["text"]))


def sample(
    path: Path, *, n: int = 160, seed: int = 24, revision: int | None = None
) -> list[dict[str, Any]]:
    pool = candidate_pool(path, revision=revision)
    return random.Random(seed).sample(pool, min(n, len(pool)))


def wilson(count: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``count`` in ``total`` (95 % by default), rounded."""
    if total <= 0:
        return (0.0, 1.0)
    p = count / total
    centre = p + z * z / (2 * total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    scale = 1 + z * z / total
    low, high = (centre - half) / scale, (centre + half) / scale
    return (round(max(0.0, low), 3), round(min(1.0, high), 3))


def rates(labels: Path) -> dict[str, Any]:
    """Counts and shares per label of a judged file, and the issue's two figures, each share
    with its 95 % interval (the issue's goals: durable >= 0.85, distorted or wrong <= 0.04)."""
    data = json.loads(labels.read_text(encoding="utf-8"))
    counts = Counter(f["label"] for f in data["facts"])
    total = sum(counts.values())
    out: dict[str, Any] = {"judged": total, "version": data.get("version")}
    for label in LABELS:
        out[label] = {
            "count": counts[label],
            "share": round(counts[label] / max(1, total), 3),
            "ci95": wilson(counts[label], total),
        }
    wrong = counts["distorted"] + counts["should_not_store"]
    out["distorted_or_wrongly_stored"] = round(wrong / max(1, total), 3)
    out["distorted_or_wrongly_stored_ci95"] = wilson(wrong, total)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m quipu.evals.fact_sample")
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--revision", type=int, default=None)
    parser.add_argument("--n", type=int, default=160)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--rates", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.rates is not None:
        print(json.dumps(rates(args.rates), indent=1))
        return
    if args.file is None:
        parser.error("a LongMemEval file or --rates LABELS")
    for fact in sample(args.file, n=args.n, seed=args.seed, revision=args.revision):
        sys.stdout.write(json.dumps(fact, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
