"""Stored BM25 keys follow the tokenizer: a store written by an older TOKENIZER_VERSION has
its keys recomputed when opened (here: the observed month and year added in version 2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import Principal, Role
from quipu.core.scopes import resolve_scope
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.retrieval.bm25 import TOKENIZER_VERSION
from quipu.storage.sqlite.store import SQLiteStore

ALICE = Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")


def test_sqlite_keys_written_by_an_older_tokenizer_are_recomputed(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    MemoryService(store, local_embedder, Limits()).remember(
        ALICE, "we went hiking near the lake", observed_at="2023-05-08T10:00:00Z"
    )
    store.close()
    with sqlite3.connect(path) as raw:  # what version 1 stored: no date keys
        raw.execute("UPDATE memory_versions SET terms = 'went hike near lake'")
        raw.execute("UPDATE store_meta SET value = '1' WHERE key = 'terms_version'")
    store = SQLiteStore(path)
    ref = resolve_scope(ALICE, "agent")
    found, _ = store.text_candidates(ref, "in May 2023", Filters(), 10)
    assert len(found) == 1
    with sqlite3.connect(path) as raw:
        (terms,) = raw.execute("SELECT terms FROM memory_versions").fetchone()
        (version,) = raw.execute(
            "SELECT value FROM store_meta WHERE key = 'terms_version'"
        ).fetchone()
    assert terms.endswith("may 2023") and version == TOKENIZER_VERSION
    store.close()
