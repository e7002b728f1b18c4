"""Calibration of ``answer_confidence`` (issue 25, RECALL-9) on a labelled set larger than
`quipu bench knowledge` can afford: `python -m quipu.evals.answer_confidence --data
locomo10.json` prints the figures docs/knowledge.md quotes.

The labelled set: the knowledge half of the bench's scenario for every LoCoMo conversation
(one article per session ``n % 4 == 0``, as :func:`quipu.evals.knowledge_bench.place_of`
places it), each scored question searched as a merged recall searches knowledge (an agent key,
a pool of 30). A question is *answered* when the top article is one of its evidence sessions.
The separation is the product's own (:func:`quipu.retrieval.selection.answer_confidence`).

Reported: the base rate; the separation's AUC; and, leaving one conversation out at a time,
the accuracy of the thresholds in use, of the accuracy-best ``answer`` cut of the other
conversations, and of never answering, with how often each verdict's top article was evidence.
``weak`` is calibrated as the cut that best separates answered from unanswered questions
whatever the base rate (Youden's J: true-positive rate minus false-positive rate)."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.base import Embedder
from quipu.evals.datasets import load_locomo
from quipu.evals.knowledge_bench import place_of
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.retrieval.selection import ANSWER_SEPARATION, WEAK_SEPARATION, answer_confidence

#: The knowledge pool a merged recall searches at k = 10 (``Knobs.pool_size``).
POOL = 30


@dataclass(frozen=True)
class Labelled:
    """One question: its conversation, the separation of its knowledge scores (-1: none) and
    whether the top article is evidence."""

    group: int
    separation: float
    answered: bool


def collect(path: str | Path, embedder: Embedder) -> list[Labelled]:
    """The labelled set over every conversation of ``path`` (see the module)."""
    from quipu.storage.sqlite.store import SQLiteStore

    found: list[Labelled] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, conv in enumerate(load_locomo(path)):
            store = SQLiteStore(Path(tmp) / f"c{n}.db")
            service = MemoryService(store, embedder, Limits())
            kb = KnowledgeService(service, near_duplicate=1.01)  # a corpus, not a gate test
            admin = Principal(f"t{n}", "key-admin", Role.ADMIN, agent_id="curator")
            agent = Principal(f"t{n}", "key-agent", Role.AGENT, agent_id="agent", user_id="u")
            dates = {s.number: s.date_time for s in conv.sessions}
            lines: dict[int, list[str]] = {}
            for turn in conv.turns:
                if place_of(turn.session) == "knowledge":
                    lines.setdefault(turn.session, []).append(turn.text)
            session_of: dict[str, int] = {}
            for number, text in sorted(lines.items()):
                body = "\n".join(text)
                while len(body.encode("utf-8")) > 32_000:
                    body = body[: len(body) // 2]
                title = f"{conv.sample_id} session {number} ({dates[number]})"[:200]
                session_of[kb.create(admin, title, body).article.id] = number
            for question in conv.scored_questions():
                hits = kb.search(agent, question.question, k=POOL).results
                _, separation = answer_confidence([h.score for h in hits])
                top = session_of[hits[0].article.id] if hits else None
                found.append(
                    Labelled(
                        n,
                        -1.0 if separation is None else separation,
                        top in question.evidence_sessions,
                    )
                )
            service.close()
            store.close()
    return found


def auc(items: Sequence[Labelled]) -> float:
    """The chance that an answered question's separation is above an unanswered one's."""
    pos = np.array([i.separation for i in items if i.answered])
    neg = np.array([i.separation for i in items if not i.answered])
    if not pos.size or not neg.size:
        return math.nan
    wins = sum(float((p > neg).sum()) + 0.5 * float((p == neg).sum()) for p in pos)
    return wins / (pos.size * neg.size)


def accuracy(items: Sequence[Labelled], cut: float) -> float:
    """How often ``separation >= cut`` says rightly whether the top article is evidence."""
    return sum((i.separation >= cut) == i.answered for i in items) / max(len(items), 1)


def accuracy_cut(items: Sequence[Labelled]) -> float:
    """The cut with the best accuracy (ties to the higher cut; inf: never answer)."""
    cuts = [*sorted({i.separation for i in items}), math.inf]
    return max(cuts, key=lambda c: (accuracy(items, c), c))


def youden_cut(items: Sequence[Labelled]) -> float:
    """The cut with the largest true-positive rate minus false-positive rate (ties higher)."""
    pos = np.array([i.separation for i in items if i.answered])
    neg = np.array([i.separation for i in items if not i.answered])
    if not pos.size or not neg.size:
        return math.inf
    cuts = sorted({i.separation for i in items})
    return max(cuts, key=lambda c: (float((pos >= c).mean() - (neg >= c).mean()), c))


def evaluate(items: Sequence[Labelled]) -> dict[str, Any]:
    """The figures of the module's docstring."""
    groups = sorted({i.group for i in items})
    verdicts: dict[str, list[bool]] = {"answer": [], "weak": [], "none": []}
    right_in_use = right_fitted = 0
    folds = []
    for group in groups:
        train = [i for i in items if i.group != group]
        test = [i for i in items if i.group == group]
        cut, weak = accuracy_cut(train), youden_cut(train)
        folds.append({"held_out": group, "answer_cut": _round(cut), "weak_cut": _round(weak)})
        right_fitted += sum((i.separation >= cut) == i.answered for i in test)
        right_in_use += sum((i.separation >= ANSWER_SEPARATION) == i.answered for i in test)
        for i in test:
            verdict = _verdict(i.separation)
            verdicts[verdict].append(i.answered)
    n = max(len(items), 1)
    base = sum(i.answered for i in items) / n
    return {
        "questions": len(items),
        "conversations": len(groups),
        "base_rate": round(base, 4),
        "auc": round(auc(items), 4),
        "thresholds_in_use": {"answer": ANSWER_SEPARATION, "weak": WEAK_SEPARATION},
        "accuracy_in_use": round(right_in_use / n, 4),
        "accuracy_leave_one_out_fitted_cut": round(right_fitted / n, 4),
        "accuracy_never_answer": round(1 - base, 4),
        "evidence_rate_per_verdict_in_use": {
            v: {"questions": len(ys), "top_is_evidence": round(sum(ys) / len(ys), 4)}
            for v, ys in verdicts.items()
            if ys
        },
        "cuts_on_all": {"answer": _round(accuracy_cut(items)), "weak": _round(youden_cut(items))},
        "folds": folds,
    }


def _verdict(separation: float) -> str:
    if separation >= ANSWER_SEPARATION:
        return "answer"
    return "weak" if separation >= WEAK_SEPARATION else "none"


def _round(cut: float) -> float | None:
    return None if math.isinf(cut) else round(cut, 4)


if __name__ == "__main__":  # pragma: no cover
    from quipu.embeddings.local import LocalEmbedder

    data = sys.argv[sys.argv.index("--data") + 1] if "--data" in sys.argv else None
    if data is None:
        raise SystemExit("usage: python -m quipu.evals.answer_confidence --data locomo10.json")
    print(json.dumps(evaluate(collect(data, LocalEmbedder())), indent=2))
