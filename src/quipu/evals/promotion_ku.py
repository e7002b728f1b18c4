"""Knowledge updates across promoted sessions (issue 24): on the LongMemEval knowledge-update
questions where the user stated an attribute's old value and its new value in two different
sessions, is the newer value current and the older one superseded once every session of the
haystack is promoted, in date order (`quipu eval promotion --longmemeval FILE
--knowledge-updates`)?

The pairs are labelled by hand in ``evals/data/knowledge_updates/longmemeval_pairs.json``:
per question the two sessions, a topic and the two values as regular expressions. A promoted
fact *states the old value* when it came from the old session and its text matches the topic
and the old value; likewise the new one. Per question:

* ``new_current``: a fact stating the new value is active, current, with no ``invalid_at``;
* ``old_stored``: a fact stating the old value was promoted;
* ``old_superseded``: such facts exist and none of them is current any more;
* ``updated``: both (the issue's figure: "the newer value is current and the old superseded").

The pairs are split into a *tuning* half and a *held-out* half, over groups of questions that
share their statements, with a fixed seed (:func:`split`), drawn before the quantity slots were
written; each half is reported apart, beside the extractor's previous revision in the same run.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from quipu.composition import build_runtime, load_settings
from quipu.core.limits import Limits
from quipu.core.records import Kind, MemoryVersion, Status
from quipu.embeddings.base import Embedder
from quipu.evals.datasets import LMEQuestion, load_longmemeval
from quipu.evals.promotion_public import EVAL_AGENT, all_promoted
from quipu.extraction.deterministic import REVISION, DeterministicExtractor
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService
from quipu.sessions import PROMOTE
from quipu.storage.sqlite.store import SQLiteStore

__all__ = ["KnowledgePair", "load_pairs", "run_knowledge_updates", "split"]

PAIRS = Path(__file__).parent / "data" / "knowledge_updates" / "longmemeval_pairs.json"
SEED = 24
#: The arms of a run: the rules before the quantity slots (revision 3) and the latest.
ARMS: dict[str, int] = {"before": 3, "after": REVISION}


@dataclass(frozen=True)
class KnowledgePair:
    question_id: str
    group: str
    attribute: str
    old_session: str
    new_session: str
    topic: re.Pattern[str]
    old: re.Pattern[str]
    new: re.Pattern[str]

    def states(self, fact: MemoryVersion, which: str) -> bool:
        """Whether ``fact`` states the ``old`` or ``new`` value, from that value's session."""
        session = self.old_session if which == "old" else self.new_session
        value = self.old if which == "old" else self.new
        return (
            fact.provenance.session_id == session
            and self.topic.search(fact.text) is not None
            and value.search(fact.text) is not None
        )


def load_pairs(path: Path = PAIRS) -> list[KnowledgePair]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [
        KnowledgePair(
            p["question_id"],
            p["group"],
            p["attribute"],
            p["old_session"],
            p["new_session"],
            re.compile(p["topic"], re.IGNORECASE),
            re.compile(p["old"], re.IGNORECASE),
            re.compile(p["new"], re.IGNORECASE),
        )
        for p in raw["pairs"]
    ]


def split(pairs: Sequence[KnowledgePair], seed: int = SEED) -> dict[str, list[KnowledgePair]]:
    """``tuning`` and ``held_out``: the groups shuffled with ``seed``, the first half (rounded
    up) tuning. Questions sharing statements share a group, so no statement is in both."""
    groups = sorted({p.group for p in pairs})
    random.Random(seed).shuffle(groups)
    tuning = set(groups[: (len(groups) + 1) // 2])
    return {
        "tuning": [p for p in pairs if p.group in tuning],
        "held_out": [p for p in pairs if p.group not in tuning],
    }


def _promoted(rt: Any) -> list[MemoryVersion]:
    return [m for m in all_promoted(rt) if m.kind is not Kind.EPISODE]


def _current(m: MemoryVersion) -> bool:
    return m.status is Status.ACTIVE and m.invalid_at is None and m.is_current


def _promote_all(q: LMEQuestion, embedder: Embedder, revision: int, path: Path) -> list[Any]:
    settings = load_settings(
        {"database": str(path), "worker_embedded": False, "promotion_episodes": False},
        environ={},
    )
    service = MemoryService(SQLiteStore(path), embedder, Limits(quota_per_owner=1_000_000))
    rt = build_runtime(settings, service, extractor=DeterministicExtractor(revision=revision))
    try:
        promote = Worker(rt.worker.queue, {PROMOTE: rt.worker.handlers[PROMOTE]})
        seen: set[str] = set()
        for session in sorted(q.sessions, key=lambda s: s.observed_at):
            if session.session_id in seen:
                continue
            seen.add(session.session_id)
            for seq, turn in enumerate(session.turns, start=1):
                at = session.observed_at + timedelta(seconds=seq)
                rt.sessions.append(
                    EVAL_AGENT, session.session_id, turn.role, turn.content, observed_at=at
                )
            rt.sessions.promote(EVAL_AGENT, session.session_id)
            promote.drain()
        return _promoted(rt)
    finally:
        rt.close()


def _judge(pair: KnowledgePair, facts: Sequence[MemoryVersion]) -> dict[str, Any]:
    old = [f for f in facts if pair.states(f, "old")]
    new = [f for f in facts if pair.states(f, "new")]
    new_current = any(_current(f) for f in new)
    old_superseded = bool(old) and not any(_current(f) for f in old)
    return {
        "question_id": pair.question_id,
        "attribute": pair.attribute,
        "new_current": new_current,
        "old_stored": bool(old),
        "old_superseded": old_superseded,
        "updated": new_current and old_superseded,
        "old_facts": [[f.text, f.status.value] for f in old],
        "new_facts": [[f.text, f.status.value] for f in new],
    }


def _summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def count(key: str) -> str:
        return f"{sum(bool(r[key]) for r in rows)}/{len(rows)}"

    return {
        "questions": len(rows),
        "new_current": count("new_current"),
        "old_stored": count("old_stored"),
        "old_superseded": count("old_superseded"),
        "updated": count("updated"),
        "updated_ratio": round(sum(r["updated"] for r in rows) / len(rows), 3) if rows else None,
    }


def run_knowledge_updates(
    path: Path,
    embedder: Embedder,
    *,
    progress: Callable[[str], None] = lambda _m: None,
    arms: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Promote every session of each labelled question's haystack, per arm (extractor
    revision), and report the figures per half (``tuning``, ``held_out``) and per question."""
    pairs = load_pairs()
    questions = {q.question_id: q for q in load_longmemeval(path)}
    halves = split(pairs)
    out: dict[str, Any] = {
        "file": path.name,
        "seed": SEED,
        "halves": {h: [p.question_id for p in ps] for h, ps in halves.items()},
        "arms": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for arm, revision in (arms or ARMS).items():
            rows: dict[str, dict[str, Any]] = {}
            for n, pair in enumerate(pairs, start=1):
                q = questions.get(pair.question_id)
                if q is None:
                    continue
                progress(f"{arm} {n}/{len(pairs)} {pair.question_id}")
                db = Path(tmp) / f"{arm}-{pair.question_id}.db"
                rows[pair.question_id] = _judge(pair, _promote_all(q, embedder, revision, db))
            out["arms"][arm] = {
                "revision": revision,
                **{
                    h: _summary([rows[p.question_id] for p in ps if p.question_id in rows])
                    for h, ps in halves.items()
                },
                "all": _summary(list(rows.values())),
                "questions": list(rows.values()),
            }
    return out
