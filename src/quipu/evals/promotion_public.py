"""Promotion measured on public dialogues (issue 24): what promotion keeps of LongMemEval and
LoCoMo sessions, old extractor beside new, in one run (`quipu eval promotion --longmemeval`).

The protocol is an agent builder's: every turn of every haystack session is appended to a
session (``observed_at`` = the session's date), each session is promoted, then the benchmark's
questions are asked with ``recall`` over what promotion wrote. Three arms, each a fresh SQLite
store per haystack with the same embedder:

``raw``
    every **user** turn written with ``remember`` (the official LongMemEval retrieval protocol,
    the issue's 93 % anchor); LoCoMo: every turn (``"<speaker>: <text>"``).
``old``
    promotion as it was before issue 24: facts only, the deterministic extractor's rules of
    revision 1.
``prev``
    facts only, the rules of revision 2 (the extractor before its precision pass, version
    1.2), so the facts of the previous extractor and the current one are compared in one run.
``facts``
    facts only, the current rules (not run by default: ``arms=`` of :func:`run_longmemeval`
    picks it, for a quick fact-quality run beside ``prev``).
``new``
    promotion now: episodes plus facts from the current rules, the episodes written without a
    vector and embedded afterwards by the ``embed_pending`` job the promotion enqueues (drained
    once every session is promoted, before the questions; its time is reported apart);
``inline``
    the same, each episode embedded inside its promotion (before the backfill), for the cost
    and quality comparison in the same run.

Reported per question type (LongMemEval) or category (LoCoMo):

* ``any@5`` / ``all@5``: an answer (every answer) session among the first five distinct
  sessions the ranked memories come from (a memory's session is its provenance
  ``session_id``); scored questions only (:meth:`LMEQuestion.is_scored`);
* ``fact_from_evidence``: a promoted *fact* (not an episode) came from an evidence turn (a
  ``has_answer`` turn; LoCoMo: an evidence dialog id), for single-session-user, preference and
  knowledge-update questions;
* ``fact_with_answer``: such a fact also holds at least half of the answer's content terms
  (a stricter, lexical reading of "evidence captured");
* knowledge updates: where facts came from evidence turns of two answer sessions, the newer
  one is current (``newer_current``) and an older one superseded (``old_superseded``);
* storage: characters written (text, plus quotes) over the characters of the raw user turns
  and of all turns;
* promotion cost: milliseconds per session (median, p95), embedding and writing included;
  the ``embed_pending`` backfill's total time and its share per session beside it, and
  ``any@5`` asked once more *before* the backfill (recall by the episodes' words only).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from quipu.composition import build_runtime, load_settings
from quipu.core.limits import Limits
from quipu.core.records import Kind, MemoryVersion, Principal, Role, Status
from quipu.embeddings.base import Embedder
from quipu.errors import InvalidInput
from quipu.evals.datasets import LMEQuestion, load_locomo, load_longmemeval
from quipu.evals.metrics import percentile
from quipu.evals.promotion import terms
from quipu.evals.promotion_targets import targets
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService
from quipu.runtime import Runtime
from quipu.sessions import PROMOTE
from quipu.storage.sqlite.store import SQLiteStore

__all__ = [
    "ARMS",
    "EVAL_AGENT",
    "SCOPE",
    "Dialogue",
    "all_promoted",
    "run_locomo",
    "run_longmemeval",
]

ARMS = ("raw", "old", "new", "inline", "prev", "facts")
#: The arms a run takes unless told otherwise.
DEFAULT_ARMS = ("old", "prev", "new", "inline", "raw")
#: The deterministic rules' revision per arm (None: the latest).
_REVISION = {"old": 1, "prev": 2}
K = 5
#: Promoted facts drawn at random (seeded) per arm, for judging by hand.
SAMPLE = 200
FACT_TYPES = ("single-session-user", "single-session-preference", "knowledge-update")
SCOPE = "agent_user"
EVAL_AGENT = Principal("local", "eval", Role.AGENT, agent_id="eval", user_id="user")


@dataclass(frozen=True)
class DialogueTurn:
    session_id: str
    seq: int
    role: str
    text: str
    at: datetime
    evidence: bool


@dataclass(frozen=True)
class Dialogue:
    """One haystack and the questions asked of it, in a shape both benchmarks fit."""

    dialogue_id: str
    turns: tuple[DialogueTurn, ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Question:
    question_id: str
    group: str
    text: str
    answer: str
    gold_sessions: frozenset[str]
    evidence: frozenset[tuple[str, int]]
    """(session id, turn seq) of the evidence turns."""
    session_dates: dict[str, datetime] = field(default_factory=dict)


def _lme_dialogue(q: LMEQuestion) -> Dialogue:
    turns: list[DialogueTurn] = []
    seen: set[str] = set()
    for session in q.sessions:
        if session.session_id in seen:
            continue
        seen.add(session.session_id)
        for seq, t in enumerate(session.turns, start=1):
            turns.append(
                DialogueTurn(
                    session.session_id,
                    seq,
                    t.role,
                    t.content,
                    session.observed_at + timedelta(seconds=seq),
                    t.has_answer and session.session_id in q.answer_session_ids,
                )
            )
    evidence = frozenset((t.session_id, t.seq) for t in turns if t.evidence)
    dates = {s.session_id: s.observed_at for s in q.sessions}
    question = Question(
        q.question_id,
        q.question_type,
        q.question,
        q.answer,
        q.gold_sessions() if q.is_scored() else frozenset(),
        evidence,
        dates,
    )
    return Dialogue(q.question_id, tuple(turns), (question,))


def _locomo_dialogues(path: Path, limit: int | None) -> list[Dialogue]:
    out = []
    for conv in load_locomo(path)[:limit]:
        turns: list[DialogueTurn] = []
        seqs: dict[str, int] = {}
        ids: dict[str, tuple[str, int]] = {}
        dates = {f"session-{s.number}": s.observed_at for s in conv.sessions}
        speakers = {conv.speaker_a: "user", conv.speaker_b: "assistant"}
        for turn in conv.turns:
            sid = f"session-{turn.session}"
            seqs[sid] = seqs.get(sid, 0) + 1
            body = turn.text.split(": ", 1)[1] if ": " in turn.text else turn.text
            at = turn.observed_at + timedelta(seconds=seqs[sid])
            turns.append(DialogueTurn(sid, seqs[sid], speakers[turn.speaker], body, at, False))
            ids[turn.turn_id] = (sid, seqs[sid])
        questions = []
        for q in conv.scored_questions():
            found = [ids[e] for e in q.evidence if e in ids]
            if not found:
                continue
            questions.append(
                Question(
                    q.question_id,
                    f"category-{q.category}",
                    q.question,
                    q.answer or "",
                    frozenset(s for s, _ in found),
                    frozenset(found),
                    dates,
                )
            )
        out.append(Dialogue(conv.sample_id, tuple(turns), tuple(questions)))
    return out


def _runtime(path: Path, embedder: Embedder, arm: str) -> Runtime:
    settings = load_settings(
        {
            "database": str(path),
            "worker_embedded": False,
            "promotion_episodes": arm in ("new", "inline"),
            "promotion_defer_episode_embedding": arm != "inline",
            "promotion_max_candidates": 1000,
        },
        environ={},
    )
    service = MemoryService(SQLiteStore(path), embedder, Limits(quota_per_owner=1_000_000))
    extractor = DeterministicExtractor(revision=_REVISION.get(arm))
    return build_runtime(settings, service, extractor=extractor)


@dataclass
class _ArmResult:
    hits: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    fact_evidence: dict[str, bool] = field(default_factory=dict)
    fact_answer: dict[str, bool] = field(default_factory=dict)
    updates: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    session_ms: list[float] = field(default_factory=list)
    backfill_ms: float = 0.0
    pending_after_backfill: int = 0
    hits_before_backfill: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    chars: int = 0
    memories: int = 0
    facts: int = 0
    episodes: int = 0
    written_facts: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0


def all_promoted(rt: Runtime) -> list[MemoryVersion]:
    out: list[MemoryVersion] = []
    for status in ("active", "superseded"):
        cursor: str | None = None
        while True:
            page = rt.service.list(
                EVAL_AGENT, scope=SCOPE, statuses=[status], cursor=cursor, limit=200
            )
            out.extend(page.items)
            cursor = page.next_cursor
            if not cursor:
                break
    return out


def _chars(m: MemoryVersion) -> int:
    return len(m.text) + len(m.provenance.quote or "")


def _run_arm(
    arm: str, dialogue: Dialogue, embedder: Embedder, workdir: Path, out: _ArmResult
) -> None:
    path = workdir / f"{arm}-{dialogue.dialogue_id}.db"
    rt = _runtime(path, embedder, arm)
    try:
        if arm == "raw":
            for t in dialogue.turns:
                if t.role == "user" or dialogue.questions[0].group.startswith("category"):
                    try:
                        rt.service.remember(
                            EVAL_AGENT,
                            t.text,
                            scope=SCOPE,
                            session_id=t.session_id,
                            observed_at=t.at,
                        )
                    except InvalidInput:
                        out.refused += 1  # over the memory text bound (16 KB)
        else:
            for t in dialogue.turns:
                rt.sessions.append(EVAL_AGENT, t.session_id, t.role, t.text, observed_at=t.at)
            promote_only = Worker(rt.worker.queue, {PROMOTE: rt.worker.handlers[PROMOTE]})
            for sid in dict.fromkeys(t.session_id for t in dialogue.turns):
                started = time.perf_counter()
                rt.sessions.promote(EVAL_AGENT, sid)
                promote_only.drain()
                out.session_ms.append(1000 * (time.perf_counter() - started))
            if arm == "new":
                out.hits_before_backfill.update(_hits(rt, dialogue))
            started = time.perf_counter()
            rt.worker.drain()  # the embed_pending job the promotions enqueued
            out.backfill_ms += 1000 * (time.perf_counter() - started)
            out.pending_after_backfill += len(rt.service.store.missing_vectors(100_000))
        written = all_promoted(rt)
        out.chars += sum(_chars(m) for m in written)
        out.memories += len(written)
        facts = [m for m in written if m.kind is not Kind.EPISODE]
        if arm != "raw":
            out.written_facts.extend(
                {
                    "source": f"{dialogue.dialogue_id}/{f.provenance.session_id}"
                    f"/{f.provenance.turn_seq}",
                    "text": f.text,
                    "quote": f.provenance.quote,
                    "kind": f.kind.value,
                    "status": f.status.value,
                }
                for f in facts
            )
            out.facts += len(facts)
            out.episodes += len(written) - len(facts)
        out.hits.update(_hits(rt, dialogue))
        for q in dialogue.questions:
            if arm == "raw" or not q.evidence:
                continue
            _score_facts(q, facts, out)
    finally:
        rt.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _hits(rt: Runtime, dialogue: Dialogue) -> dict[str, tuple[bool, bool]]:
    """question id -> (an answer session in the top five, every answer session in it)."""
    hits: dict[str, tuple[bool, bool]] = {}
    for q in dialogue.questions:
        if not q.gold_sessions:
            continue
        result = rt.service.recall(EVAL_AGENT, q.text, scope=SCOPE, k=50)
        ranked: list[str] = []
        for hit in result.results:
            where = hit.memory.provenance.session_id
            if where and where not in ranked:
                ranked.append(where)
        top = set(ranked[:K])
        hits[q.question_id] = (bool(top & q.gold_sessions), q.gold_sessions <= top)
    return hits


def _score_facts(q: Question, facts: Sequence[MemoryVersion], out: _ArmResult) -> None:
    from_evidence = [
        f for f in facts if (f.provenance.session_id, f.provenance.turn_seq) in q.evidence
    ]
    answer = terms(q.answer)
    with_answer = [
        f for f in from_evidence if answer and len(terms(f.text) & answer) >= len(answer) / 2
    ]
    out.fact_evidence[q.question_id] = bool(from_evidence)
    out.fact_answer[q.question_id] = bool(with_answer)
    if q.group != "knowledge-update":
        return
    by_session: dict[str, list[MemoryVersion]] = {}
    for f in from_evidence:
        by_session.setdefault(f.provenance.session_id or "", []).append(f)
    if len(by_session) < 2:
        return
    order = sorted(by_session, key=lambda s: q.session_dates.get(s, datetime.min))
    newest, older = by_session[order[-1]], [f for s in order[:-1] for f in by_session[s]]
    out.updates[q.question_id] = (
        any(f.status is Status.ACTIVE for f in newest),
        any(f.status is Status.SUPERSEDED for f in older),
    )


def _ratio(values: Iterable[bool]) -> float | None:
    seen = list(values)
    return round(sum(seen) / len(seen), 3) if seen else None


def _report(
    dialogues: Sequence[Dialogue], results: dict[str, _ArmResult], raw_chars: dict[str, int]
) -> dict[str, Any]:
    groups: dict[str, list[Question]] = {}
    for d in dialogues:
        for q in d.questions:
            groups.setdefault(q.group, []).append(q)
    report: dict[str, Any] = {"k": K, "arms": {}}
    for arm, r in results.items():
        per_group: dict[str, Any] = {}
        for group, qs in sorted(
            [*groups.items(), ("all", [q for v in groups.values() for q in v])]
        ):
            ids = [q.question_id for q in qs]
            row: dict[str, Any] = {
                "questions": len([i for i in ids if i in r.hits]),
                "any@5": _ratio(r.hits[i][0] for i in ids if i in r.hits),
                "all@5": _ratio(r.hits[i][1] for i in ids if i in r.hits),
            }
            if r.hits_before_backfill:
                before = r.hits_before_backfill
                row["any@5_before_backfill"] = _ratio(before[i][0] for i in ids if i in before)
                row["all@5_before_backfill"] = _ratio(before[i][1] for i in ids if i in before)
            if arm != "raw":
                fact_ids = [
                    q.question_id
                    for q in qs
                    if q.group in FACT_TYPES or q.group.startswith("category")
                ]
                row["fact_from_evidence"] = _ratio(
                    r.fact_evidence[i] for i in fact_ids if i in r.fact_evidence
                )
                row["fact_with_answer"] = _ratio(
                    r.fact_answer[i] for i in fact_ids if i in r.fact_answer
                )
                upd = [r.updates[i] for i in ids if i in r.updates]
                if upd:
                    row["updates_both_stated"] = len(upd)
                    row["newer_current"] = _ratio(u[0] for u in upd)
                    row["old_superseded"] = _ratio(u[1] for u in upd)
                    row["newer_current_and_old_superseded"] = _ratio(u[0] and u[1] for u in upd)
            per_group[group] = row
        entry: dict[str, Any] = {
            "by_group": per_group,
            "memories": r.memories,
            "chars": r.chars,
            "refused_turns": r.refused,
        }
        if arm != "raw":
            entry.update(
                facts=r.facts,
                episodes=r.episodes,
                storage_vs_raw_user_turns=round(r.chars / max(1, raw_chars["user"]), 3),
                storage_vs_all_turns=round(r.chars / max(1, raw_chars["all"]), 3),
                promote_ms_per_session={
                    "median": round(statistics.median(r.session_ms), 1) if r.session_ms else None,
                    "p95": round(percentile(r.session_ms, 95), 1) if r.session_ms else None,
                    "sessions": len(r.session_ms),
                },
                embed_backfill_ms={
                    "total": round(r.backfill_ms, 1),
                    "per_session": round(r.backfill_ms / max(1, len(r.session_ms)), 1),
                    "rows_left_without_vector": r.pending_after_backfill,
                },
            )
        if arm != "raw":
            pool = sorted(r.written_facts, key=lambda f: (f["source"], f["text"]))
            entry["fact_sample"] = random.Random(24).sample(pool, min(SAMPLE, len(pool)))
        report["arms"][arm] = entry
    report["raw_chars"] = raw_chars
    report["targets"] = targets(report)  # each goal of issue 24 beside its figure, per arm
    return report


def _run(
    dialogues: Sequence[Dialogue],
    embedder: Embedder,
    progress: Callable[[str], None],
    arms: Sequence[str] = DEFAULT_ARMS,
) -> dict[str, Any]:
    results = {arm: _ArmResult() for arm in arms}
    raw_chars = {"user": 0, "all": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for n, dialogue in enumerate(dialogues, start=1):
            progress(f"{n}/{len(dialogues)} {dialogue.dialogue_id}: {len(dialogue.turns)} turns")
            raw_chars["user"] += sum(len(t.text) for t in dialogue.turns if t.role == "user")
            raw_chars["all"] += sum(len(t.text) for t in dialogue.turns)
            for arm in arms:
                _run_arm(arm, dialogue, embedder, Path(tmp), results[arm])
    return _report(dialogues, results, raw_chars)


def run_longmemeval(
    path: Path,
    embedder: Embedder,
    *,
    limit: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    arms: Sequence[str] = DEFAULT_ARMS,
    question_types: Collection[str] | None = None,
) -> dict[str, Any]:
    """``question_types``: only questions of these types (before ``limit``)."""
    questions = [
        q
        for q in load_longmemeval(path)
        if question_types is None or q.question_type in question_types
    ]
    dialogues = [_lme_dialogue(q) for q in questions[:limit]]
    run = _run(dialogues, embedder, progress, arms)
    return {"benchmark": "longmemeval", "file": path.name, **run}


def run_locomo(
    path: Path,
    embedder: Embedder,
    *,
    limit: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    dialogues = _locomo_dialogues(path, limit)
    return {"benchmark": "locomo", "file": path.name, **_run(dialogues, embedder, progress)}


def extraction_capture(path: Path, *, min_confidence: float = 0.5) -> dict[str, Any]:
    """Evidence captured as a fact by the extractor alone (no store, no embedder: seconds), old
    rules beside new, on every single-session-user, preference and knowledge-update question
    of a LongMemEval file: ``fact_from_evidence`` and ``fact_with_answer`` as in the full run,
    over the answer sessions' candidates at ``min_confidence`` (the promotion gate)."""
    from quipu.extraction.base import Turn

    out: dict[str, Any] = {}
    questions = [q for q in load_longmemeval(path) if q.question_type in FACT_TYPES]
    for name, revision in (("old", 1), ("prev", 2), ("new", None)):
        extractor = DeterministicExtractor(revision=revision)
        rows: dict[str, list[tuple[bool, bool]]] = {}
        for q in questions:
            d = _lme_dialogue(q)
            (question,) = d.questions
            if not question.evidence:
                continue
            facts = []
            for sid in {s for s, _ in question.evidence}:
                turns = [Turn(t.role, t.text, t.seq, t.at) for t in d.turns if t.session_id == sid]
                facts += [
                    (sid, c)
                    for c in extractor.run(turns).candidates
                    if c.confidence >= min_confidence
                ]
            hit = [c for sid, c in facts if (sid, c.turn_seq) in question.evidence]
            answer = terms(question.answer)
            full = [c for c in hit if answer and len(terms(c.text) & answer) >= len(answer) / 2]
            rows.setdefault(q.question_type, []).append((bool(hit), bool(full)))
        rows["all"] = [r for v in list(rows.values()) for r in v]
        out[name] = {
            group: {
                "questions": len(r),
                "fact_from_evidence": _ratio(x for x, _ in r),
                "fact_with_answer": _ratio(y for _, y in r),
            }
            for group, r in sorted(rows.items())
        }
    return out
