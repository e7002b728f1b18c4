"""Promotion throughput on real conversations (`quipu bench promote`, PROMO, issue 5).

Each LoCoMo conversation goes into a fresh store. Both speakers are subjects of their own:
in speaker A's sessions A's turns are ``user`` turns and B's are ``assistant`` turns, and the
other way round, so every turn is read once as a user turn. Promotion (deterministic
extraction, gating, secret scrubbing, embedding and writing) is timed; appending is not.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import quipu
from quipu.core.records import Principal, Role
from quipu.embeddings.base import Embedder
from quipu.evals.datasets import load_locomo


def run(
    data: Path,
    embedder: Embedder,
    *,
    limit: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    conversations = load_locomo(data)[:limit]
    total_turns = promote_s = 0.0
    created = superseded = candidates = 0
    per_conversation = []
    for conv in conversations:
        progress(f"{conv.sample_id}: {len(conv.turns)} turns")
        with tempfile.TemporaryDirectory() as tmp:
            mem = quipu.open(Path(tmp) / "p.db", embedder=embedder, worker_embedded=False)
            rt = mem.runtime
            speakers = {
                conv.speaker_a: f"{conv.sample_id}-a",
                conv.speaker_b: f"{conv.sample_id}-b",
            }
            subjects = {
                name: Principal("local", "bench", Role.AGENT, agent_id="bench", user_id=user)
                for name, user in speakers.items()
            }
            for turn in conv.turns:
                body = turn.text.split(": ", 1)[1] if ": " in turn.text else turn.text
                for name, who in subjects.items():
                    role = "user" if turn.speaker == name else "assistant"
                    rt.sessions.append(who, f"session-{turn.session}", role, body)
            jobs = []
            for who in subjects.values():
                for session in conv.sessions:
                    job, _ = rt.sessions.promote(who, f"session-{session.number}")
                    jobs.append(job.job_id)
            started = time.perf_counter()
            rt.worker.drain(limit=10_000)
            elapsed = time.perf_counter() - started
            results = [rt.queue.store.get_job(j) for j in jobs]
            c = sum(int(j.result.get("created", 0)) for j in results if j is not None)
            s = sum(int(j.result.get("superseded", 0)) for j in results if j is not None)
            k = sum(int(j.result.get("candidates", 0)) for j in results if j is not None)
            failed = [j for j in results if j is None or j.status.value != "succeeded"]
            mem.close()
        total_turns += len(conv.turns)
        promote_s += elapsed
        created, superseded, candidates = created + c, superseded + s, candidates + k
        per_conversation.append(
            {
                "conversation": conv.sample_id,
                "turns": len(conv.turns),
                "seconds": round(elapsed, 3),
                "memories": c,
                "superseded": s,
                "candidates": k,
                "failed_jobs": len(failed),
            }
        )
    return {
        "conversations": len(conversations),
        "turns": int(total_turns),
        "promote_seconds": round(promote_s, 3),
        "turns_per_s": round(total_turns / promote_s, 1) if promote_s else 0.0,
        "memories": created,
        "memories_per_100_turns": round(100 * created / total_turns, 1) if total_turns else 0.0,
        "candidates": candidates,
        "superseded": superseded,
        "extractor": "deterministic",
        "per_conversation": per_conversation,
    }
