"""Two SQLite stores on one file (as two `quipu serve` workers are): the second one's scope
index follows the first one's writes by replaying ``scope_log``, not by reloading the scope,
and answers exactly as a freshly loaded index would."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore

ALICE = Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")
QUERIES = ["where does Dana sit?", "what does Sam drink", "the deployment failed", "hiking"]


def _answers(svc: MemoryService, **options: object) -> list[list[tuple[str, int, float]]]:
    return [
        [
            (h.memory.id, h.memory.version, round(h.score, 6))
            for h in svc.recall(ALICE, q, **options)
        ]
        for q in QUERIES
    ]


def test_another_processs_writes_are_replayed_into_a_warm_index(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    path = tmp_path / "shared.db"
    writer = MemoryService(SQLiteStore(path), local_embedder, Limits())
    reader = MemoryService(SQLiteStore(path), local_embedder, Limits())
    dana = writer.remember(ALICE, "Dana prefers window seats").memory
    sam = writer.remember(ALICE, "Sam drinks oat milk flat whites").memory
    before = datetime.now(UTC)
    assert reader.recall(ALICE, "where does Dana sit?").results  # loads the scope once
    assert reader.store.rebuilds + reader.store.mapped == 1  # from the rows or the writer's file

    writer.remember(ALICE, "The deployment failed twice on Tuesday")
    writer.remember(ALICE, "We went hiking near the lake", observed_at="2023-05-08T10:00:00Z")
    writer.revise(ALICE, dana.id, "Dana prefers aisle seats now")
    writer.forget(ALICE, sam.id)

    caught_up = _answers(reader)
    then = _answers(reader, as_of=before.isoformat())
    loaded = reader.store.rebuilds + reader.store.mapped
    assert loaded == 1 and reader.store.catch_ups >= 1  # replayed, not reloaded
    texts = [h.memory.text for h in reader.recall(ALICE, "where does Dana sit?")]
    assert "Dana prefers aisle seats now" in texts and "Dana prefers window seats" not in texts
    assert all("oat milk" not in h.memory.text for h in reader.recall(ALICE, "what does Sam drink"))

    fresh = MemoryService(SQLiteStore(path, index_files=False), local_embedder, Limits())
    assert caught_up == _answers(fresh)  # same hits, versions and scores as a full load
    assert then == _answers(fresh, as_of=before.isoformat())
    for svc in (writer, reader, fresh):
        svc.store.close()


def test_a_gap_in_the_log_reloads_the_scope(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    path = tmp_path / "gap.db"
    writer = MemoryService(SQLiteStore(path), local_embedder, Limits())
    reader = MemoryService(SQLiteStore(path), local_embedder, Limits())
    writer.remember(ALICE, "Dana prefers window seats")
    reader.recall(ALICE, "Dana")
    writer.remember(ALICE, "Dana's flight leaves at 9")
    with sqlite3.connect(path) as raw:  # as if pruned, or written by a bulk import
        raw.execute("DELETE FROM scope_log")
    texts = [h.memory.text for h in reader.recall(ALICE, "when does Dana's flight leave?")]
    assert "Dana's flight leaves at 9" in texts
    assert reader.store.rebuilds + reader.store.mapped == 2 and reader.store.catch_ups == 0
    writer.store.close()
    reader.store.close()


def test_vectors_attached_by_another_process_reach_a_warm_index(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """A backfilled vector (``embed_pending``) changes the scope for every process: a warm
    index elsewhere must not keep answering as if the row had none."""
    path = tmp_path / "backfill.db"
    writer = MemoryService(SQLiteStore(path), local_embedder, Limits())
    reader = MemoryService(SQLiteStore(path), local_embedder, Limits())
    writer.remember(ALICE, "Dana prefers window seats")
    late = writer.remember(ALICE, "Sam drinks oat milk flat whites", defer_embedding=True).memory
    probe = local_embedder.embed_query("a coffee order")  # shares no word with the memory
    ref = ScopeRef("t1", Scope.AGENT, "alice")

    def vector_hits(svc: MemoryService) -> list[int]:
        found, _ = svc.store.vector_candidates(ref, probe, Filters(), 10)
        return [c.key for c in found]

    assert len(vector_hits(reader)) == 1  # the reader's index is warm, one row has a vector
    assert writer.embed_pending() == 1
    fresh = MemoryService(SQLiteStore(path), local_embedder, Limits())
    assert len(vector_hits(fresh)) == 2
    assert vector_hits(reader) == vector_hits(fresh) == vector_hits(writer)
    assert late.id in {m.id for m in reader.store.load(vector_hits(reader)).values()}
    for svc in (writer, reader, fresh):
        svc.store.close()
