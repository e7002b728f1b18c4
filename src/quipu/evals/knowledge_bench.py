"""The knowledge scenario of `quipu bench knowledge` (issue 25, RECALL-9): LoCoMo conversations
split across three memory scopes and the knowledge plane, then every scored question asked two
ways at the same store:

- **merged**: one ``recall_context`` over the ``agent``, ``user`` and ``tenant`` scopes and the
  knowledge plane, ``k`` rows;
- **per-scope**: what a client did before it, one ``recall`` per scope and one
  ``knowledge_search``, ``k`` rows each, concatenated (up to 4 x ``k`` rows);
- **per-scope top-k**: those rows merged by score and cut to ``k`` (no diversity, no ledger).

Each session of a conversation goes to one place by its number: ``n % 4 == 0`` becomes one
knowledge article (title: the session and its date; body: its turns, ``"<speaker>: <text>"``
a line), 1 the ``agent`` scope, 2 the ``user`` scope, 3 the ``tenant`` scope (a memory per
turn, ``observed_at`` the session date). A row counts for the session it came from; a question
is answered at ``k`` when any (``any``) or every (``all``) evidence session is among its rows'
sessions. Tokens are the rows' ``tokens_estimate`` (UTF-8 bytes / 4) as the client would paste
them. Latency: ``recall_context`` against one single-scope ``recall``, p50/p95 over the same
questions in one run. Determinism: every question asked twice; the ``results`` arrays must be
byte-identical. ``answer_confidence``: per verdict, how often the best knowledge row of the
question is an evidence session (the labelled set is LoCoMo's evidence). The novelty gate is
off while the corpus loads (sessions of one conversation resemble each other; the scenario
measures retrieval, not the gate).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.base import Embedder
from quipu.evals.datasets import Conversation, load_locomo
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.recall_context import MergedRecall
from quipu.retrieval.selection import tokens_estimate
from quipu.storage.base import Store

SCOPES = ("agent", "user", "tenant")
_PLACES = ("knowledge", "agent", "user", "tenant")


def place_of(session: int) -> str:
    """Where a session's content goes in this scenario."""
    return _PLACES[session % 4]


def run(
    path: str | Path,
    embedder: Embedder,
    *,
    conversations: int = 2,
    skip: int = 0,
    k: int = 10,
    store: Store | None = None,
) -> dict[str, Any]:
    """The scenario over ``conversations`` of ``path`` after the first ``skip`` (see the
    module)."""
    convs = load_locomo(path)[skip : skip + conversations]
    totals: dict[str, Any] = {
        "questions": 0,
        "merged": _Tally(),
        "per_scope": _Tally(),
        "per_scope_top_k": _Tally(),
    }
    lat_merged: list[float] = []
    lat_single: list[float] = []
    mismatched = 0
    confidence: dict[str, list[int]] = {}
    separations: list[tuple[float | None, bool]] = []
    ingest_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for n, conv in enumerate(convs):
            own_store = store
            if own_store is None:
                from quipu.storage.sqlite.store import SQLiteStore

                own_store = SQLiteStore(Path(tmp) / f"k{n}.db")
            service = MemoryService(own_store, embedder, Limits())
            knowledge = KnowledgeService(service)
            knowledge.near_duplicate = 1.01  # loading a corpus, not testing the gate
            merged = MergedRecall(knowledge)
            tenant = f"bench-{n}"
            agent = Principal(
                tenant,
                "key-agent",
                Role.AGENT,
                agent_id="agent",
                user_id="user",
                grants=frozenset({"tenant:write"}),
            )
            admin = Principal(tenant, "key-admin", Role.ADMIN, agent_id="curator")
            mark = time.perf_counter()
            where = _ingest(conv, service, knowledge, agent, admin)
            ingest_s += time.perf_counter() - mark
            for question in conv.scored_questions():
                gold = set(question.evidence_sessions)
                t0 = time.perf_counter()
                out = merged.recall_context(
                    agent, question.question, scopes=list(SCOPES), k=k, budget_tokens=100_000
                )
                lat_merged.append((time.perf_counter() - t0) * 1000.0)
                again = merged.recall_context(
                    agent, question.question, scopes=list(SCOPES), k=k, budget_tokens=100_000
                )
                if json.dumps(out.results, sort_keys=True) != json.dumps(
                    again.results, sort_keys=True
                ):
                    mismatched += 1
                sessions = [where[r["id"]] for r in out.results]
                best = next((r for r in out.results if r["source"] == "knowledge"), None)
                verdict = out.meta["answer_confidence"]
                hit = best is not None and where[best["id"]] in gold
                separations.append((out.meta["answer_separation"], hit))
                confidence.setdefault(verdict, [0, 0])
                confidence[verdict][0] += 1
                confidence[verdict][1] += hit
                totals["merged"].add(gold, sessions, out.meta["tokens_selected"])
                t0 = time.perf_counter()
                service.recall(agent, question.question, scope="agent", k=k)
                lat_single.append((time.perf_counter() - t0) * 1000.0)
                rows = _per_scope(service, knowledge, agent, question.question, k)
                totals["per_scope"].add(
                    gold, [where[i] for _, i, _ in rows], sum(c for *_, c in rows)
                )
                top = sorted(rows, key=lambda r: (-r[0], r[1]))[:k]
                totals["per_scope_top_k"].add(
                    gold, [where[i] for _, i, _ in top], sum(c for *_, c in top)
                )
                totals["questions"] += 1
            merged.close()
            service.close()
            if store is None:
                own_store.close()
    return {
        "dataset": str(path),
        "conversations": len(convs),
        "skip": skip,
        "questions": totals["questions"],
        "k": k,
        "ingest_s": round(ingest_s, 1),
        "merged": totals["merged"].report(),
        "per_scope": totals["per_scope"].report(),
        "per_scope_top_k": totals["per_scope_top_k"].report(),
        "answer_confidence": {
            verdict: {"questions": n, "top_knowledge_row_is_evidence": round(hits / n, 4)}
            for verdict, (n, hits) in sorted(confidence.items())
        },
        "answer_calibration": calibrate_answer(separations),
        "deterministic": mismatched == 0,
        "nondeterministic_questions": mismatched,
        "latency_ms": {
            "recall_context_3_scopes_and_knowledge": _percentiles(lat_merged),
            "recall_single_scope": _percentiles(lat_single),
        },
    }


def _ingest(
    conv: Conversation,
    service: MemoryService,
    knowledge: KnowledgeService,
    agent: Principal,
    admin: Principal,
) -> dict[str, int]:
    """Write the conversation; the session of every row id written."""
    where: dict[str, int] = {}
    dates = {s.number: s for s in conv.sessions}
    by_session: dict[int, list[str]] = {}
    for turn in conv.turns:
        place = place_of(turn.session)
        if place == "knowledge":
            by_session.setdefault(turn.session, []).append(turn.text)
            continue
        written = service.remember(agent, turn.text, scope=place, observed_at=turn.observed_at)
        where[written.memory.id] = turn.session
    for number, lines in sorted(by_session.items()):
        session = dates[number]
        body = "\n".join(lines)
        while len(body.encode("utf-8")) > 32_000:
            body = body[: len(body) // 2]
        title = f"{conv.sample_id} session {number} ({session.date_time})"[:200]
        made = knowledge.create(admin, title, body, category="conversation")
        where[made.article.id] = number
    return where


def _per_scope(
    service: MemoryService,
    knowledge: KnowledgeService,
    who: Principal,
    query: str,
    k: int,
) -> list[tuple[float, str, int]]:
    """(score, id, tokens) of every row of one recall per scope plus one knowledge search."""
    rows: list[tuple[float, str, int]] = []
    for scope in SCOPES:
        for hit in service.recall(who, query, scope=scope, k=k).results:
            rows.append((hit.score, hit.memory.id, tokens_estimate(hit.memory.text)))
    for row in knowledge.search(who, query, k=k).results:
        cost = tokens_estimate(f"{row.article.title}\n{row.snippet}")
        rows.append((row.score, row.article.id, cost))
    return rows


class _Tally:
    def __init__(self) -> None:
        self.any_hits = 0
        self.all_hits = 0
        self.n = 0
        self.tokens: list[int] = []
        self.rows: list[int] = []

    def add(self, gold: set[int], sessions: Sequence[int], tokens: int) -> None:
        seen = set(sessions)
        self.n += 1
        self.any_hits += bool(gold & seen)
        self.all_hits += gold <= seen
        self.tokens.append(tokens)
        self.rows.append(len(sessions))

    def report(self) -> dict[str, Any]:
        n = max(self.n, 1)
        return {
            "evidence_any": round(self.any_hits / n, 4),
            "evidence_all": round(self.all_hits / n, 4),
            "tokens_per_query_mean": round(float(np.mean(self.tokens)) if self.tokens else 0.0, 1),
            "rows_per_query_mean": round(float(np.mean(self.rows)) if self.rows else 0.0, 1),
        }


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "n": 0}
    arr = np.asarray(values)
    return {
        "p50": round(float(np.percentile(arr, 50)), 2),
        "p95": round(float(np.percentile(arr, 95)), 2),
        "n": len(values),
    }


def calibrate_answer(pairs: Sequence[tuple[float | None, bool]]) -> dict[str, Any]:
    """How well ``answer`` (separation >= the threshold) predicts that the best knowledge row
    is evidence: the accuracy of the threshold in use, and the threshold with the best
    accuracy on these questions (ties to the lower one), beside the base rate."""
    from quipu.retrieval.selection import ANSWER_SEPARATION

    values = [(s if s is not None else -1.0, hit) for s, hit in pairs]
    if not values:
        return {}

    def accuracy(cut: float) -> float:
        return sum((s >= cut) == hit for s, hit in values) / len(values)

    cuts = sorted({s for s, _ in values} | {math.inf})
    best = max(cuts, key=lambda c: (accuracy(c), -c))
    return {
        "questions": len(values),
        "base_rate": round(sum(h for _, h in values) / len(values), 4),
        "threshold_in_use": ANSWER_SEPARATION,
        "accuracy_in_use": round(accuracy(ANSWER_SEPARATION), 4),
        "best_threshold": None if math.isinf(best) else round(best, 4),
        "accuracy_at_best": round(accuracy(best), 4),
    }
