"""`quipu bench documents`: the documents plane measured (issue 28, DOC-1).

**Evidence retrieval.** LongMemEval haystacks (the official protocol's user turns) are written
twice into one fresh store, each question in its own agent scope: every session as one plain
text *document* (its user turns as paragraphs, in order), and every turn as a *memory* (as
`quipu bench longmemeval` writes them). Each question is then asked of both planes with the
same ``k``:

- documents: ``search`` pointers; a gold turn is *found* when a returned chunk's
  ``[start, end)`` overlaps the turn's span in its session document;
- memories: ``recall`` hits; a gold turn is found when it is among them.

``any@k`` (at least one gold turn found) and ``all@k`` (every gold turn found) per plane, and
the cl100k tokens an agent reads per query: the snippets (documents) against the memory texts
(memories). Ingest throughput (chunks/s, memories/s) and search/recall p50/p95 are timed too.

**Scale.** :func:`scale` writes ``chunks`` x ~1,000-character chunks of generated text into one
corpus (one document per ``per_document`` chunks, each added in one call) and times ingest
(chunks/s) and ``search`` p50/p95 over the full corpus, on the store ``database`` names.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.documents import DocumentService
from quipu.embeddings.base import Embedder
from quipu.errors import QuipuError
from quipu.evals.public_bench import Haystack
from quipu.evals.tokens import count_tokens
from quipu.memories import MemoryService
from quipu.storage.base import Store

Progress = Callable[[int], None]


@dataclass
class _Plane:
    any_hits: dict[int, int]
    all_hits: dict[int, int]
    tokens: dict[int, list[int]]
    latencies: list[float]


def _plane(ks: Sequence[int]) -> _Plane:
    return _Plane({k: 0 for k in ks}, {k: 0 for k in ks}, {k: [] for k in ks}, [])


def evidence(
    service: MemoryService,
    haystacks: Sequence[Haystack],
    ks: Sequence[int] = (1, 3, 5, 10),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evidence recall of the documents plane against the memory plane (module docstring)."""
    docs = DocumentService(service)
    ks = sorted(ks)
    top = max(ks)
    planes = {"documents": _plane(ks), "memories": _plane(ks)}
    chunks = memories = 0
    doc_seconds = mem_seconds = 0.0
    questions = 0
    cache: dict[str, int] = {}
    refused: dict[str, int] = {}

    def tokens(text: str) -> int:
        if text not in cache:
            cache[text] = count_tokens(text)
        return cache[text]

    for done, haystack in enumerate(haystacks, start=1):
        ident = haystack.haystack_id
        who = Principal("bench", f"key-{ident}", Role.AGENT, agent_id=ident)
        spans: dict[str, tuple[str, int, int]] = {}
        sessions: dict[str, list[str]] = {}
        for turn in haystack.turns:
            sessions.setdefault(turn.session, []).append(turn.turn_id)
        texts = {turn.turn_id: turn.text for turn in haystack.turns}
        mark = time.perf_counter()
        for session, turn_ids in sessions.items():
            parts: list[str] = []
            at = 0
            for turn_id in turn_ids:
                body = texts[turn_id].strip() or "."
                spans[turn_id] = ("", at, at + len(body))
                parts.append(body)
                at += len(body) + 2
            added = docs.add(who, "\n\n".join(parts), title=f"session {session}")
            document_id = added["document"]["id"]
            for turn_id in turn_ids:
                _, start, end = spans[turn_id]
                spans[turn_id] = (document_id, start, end)
            chunks += int(added["chunks"])
        doc_seconds += time.perf_counter() - mark
        mark = time.perf_counter()
        turns_of: dict[str, set[str]] = {}
        for turn in haystack.turns:
            try:
                written = service.remember(
                    who, turn.text.strip() or ".", observed_at=turn.observed_at
                )
            except QuipuError as error:  # counted, as `quipu bench longmemeval` does
                refused[error.code] = refused.get(error.code, 0) + 1
                continue
            turns_of.setdefault(written.memory.id, set()).add(turn.turn_id)
            memories += 1
        mem_seconds += time.perf_counter() - mark
        for query in haystack.queries:
            gold = set(query.gold_turns)
            if not gold:
                continue
            questions += 1
            mark = time.perf_counter()
            found = docs.search(who, query.text, k=top)["results"]
            planes["documents"].latencies.append((time.perf_counter() - mark) * 1000.0)
            mark = time.perf_counter()
            hits = service.recall(who, query.text, k=top).results
            planes["memories"].latencies.append((time.perf_counter() - mark) * 1000.0)
            for k in ks:
                doc_found = {
                    turn_id
                    for turn_id in gold
                    for pointer in found[:k]
                    if spans[turn_id][0] == pointer["document_id"]
                    and pointer["start"] < spans[turn_id][2]
                    and spans[turn_id][1] < pointer["end"]
                }
                mem_found = {t for h in hits[:k] for t in turns_of.get(h.memory.id, ())} & gold
                for name, got in (("documents", doc_found), ("memories", mem_found)):
                    planes[name].any_hits[k] += bool(got)
                    planes[name].all_hits[k] += got == gold
                planes["documents"].tokens[k].append(sum(tokens(p["snippet"]) for p in found[:k]))
                planes["memories"].tokens[k].append(sum(tokens(h.memory.text) for h in hits[:k]))
        if progress is not None:
            progress(done)
    docs.close()
    return {
        "questions": questions,
        "haystacks": len(haystacks),
        "ingest": {
            "chunks": chunks,
            "chunks_per_s": round(chunks / doc_seconds, 1) if doc_seconds else None,
            "memories": memories,
            "memories_per_s": round(memories / mem_seconds, 1) if mem_seconds else None,
            "memory_turns_refused": refused,
        },
        "planes": {
            name: {
                "any_at_k": {k: _share(p.any_hits[k], questions) for k in ks},
                "all_at_k": {k: _share(p.all_hits[k], questions) for k in ks},
                "tokens_per_query_mean": {
                    k: round(statistics.fmean(p.tokens[k]), 1) if p.tokens[k] else None for k in ks
                },
                "latency_ms": _latency(p.latencies),
            }
            for name, p in planes.items()
        },
    }


_WORDS = tuple(
    [
        "pump",
        "valve",
        "filter",
        "seal",
        "hose",
        "inlet",
        "outlet",
        "pressure",
        "gauge",
        "motor",
        "impeller",
        "housing",
        "bearing",
        "gasket",
        "flange",
        "coupling",
        "shaft",
        "rotor",
        "stator",
        "winding",
        "relay",
        "fuse",
        "switch",
        "sensor",
        "probe",
        "cable",
        "bracket",
        "mount",
        "bolt",
        "washer",
        "spring",
        "lever",
        "handle",
        "panel",
        "cover",
        "drain",
        "tank",
        "reservoir",
        "nozzle",
        "manifold",
        "cylinder",
        "piston",
        "ring",
        "sleeve",
        "bushing",
        "collar",
        "clamp",
        "thermostat",
        "heater",
        "compressor",
        "fan",
        "belt",
        "pulley",
        "chain",
        "sprocket",
        "gear",
        "clutch",
        "brake",
        "damper",
        "baffle",
        "duct",
        "vent",
    ]
)


def _paragraph(rng: random.Random, number: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(140)]
    sentences = [" ".join(words[i : i + 14]).capitalize() + "." for i in range(0, 140, 14)]
    return f"Item {number}: " + " ".join(sentences)


def scale(
    embedder: Embedder,
    store: Store,
    chunks: int,
    *,
    per_document: int = 500,
    queries: int = 100,
    seed: int = 7,
    progress: Progress | None = None,
    large_chars: int = 0,
) -> dict[str, Any]:
    """Ingest ``chunks`` chunks into ``store`` (empty) in documents of ``per_document`` chunks
    each (one call per document), then one document of ``large_chars`` characters in one call
    (0: none), then time ``queries`` searches over the whole corpus. The machine's load average
    is read before and after (the figures depend on it)."""
    load_before = _load()
    rng = random.Random(seed)
    service = MemoryService(store, embedder, Limits())
    docs = DocumentService(service)
    who = Principal("bench", "key-bench", Role.AGENT, agent_id="docs-scale")
    written = 0
    seconds = 0.0
    number = 0
    chars = 0
    while written < chunks:
        count = min(per_document, chunks - written)
        text = "\n\n".join(_paragraph(rng, number + i) for i in range(count))
        number += count
        mark = time.perf_counter()
        added = docs.add(who, text, title=f"manual {number}")
        seconds += time.perf_counter() - mark
        written += int(added["chunks"])
        chars += len(text)
        if progress is not None:
            progress(written)
    large: dict[str, Any] | None = None
    if large_chars > 0:
        parts: list[str] = []
        size = 0
        while size < large_chars:
            parts.append(_paragraph(rng, number + len(parts)))
            size += len(parts[-1]) + 2
        text = "\n\n".join(parts)[:large_chars]
        mark = time.perf_counter()
        added = docs.add(who, text, title="one large manual")
        took = time.perf_counter() - mark
        large = {
            "characters": len(text),
            "chunks": int(added["chunks"]),
            "seconds": round(took, 2),
            "chunks_per_s": round(int(added["chunks"]) / took, 1) if took else None,
        }
    docs.search(who, "warm up the index")  # the first search loads the corpus
    latencies = []
    for _ in range(queries):
        query = " ".join(rng.choice(_WORDS) for _ in range(4))
        mark = time.perf_counter()
        docs.search(who, query, k=10)
        latencies.append((time.perf_counter() - mark) * 1000.0)
    backend = store.capabilities.backend
    docs.close()
    return {
        "backend": backend,
        "chunks": written,
        "characters": chars,
        "documents": -(-written // per_document),
        "ingest_seconds": round(seconds, 2),
        "chunks_per_s": round(written / seconds, 1) if seconds else None,
        "large_document": large,
        "search_latency_ms": _latency(latencies),
        "load_average": {"before": load_before, "after": _load()},
    }


def _load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # not every platform has it
        return None


def _share(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _latency(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"p50": at(0.5), "p95": at(0.95), "max": round(ordered[-1], 2), "n": len(ordered)}
