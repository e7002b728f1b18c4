"""Context keys count once (issue 31, RECALL-1): a memory is also indexed under the keys of the
memory before it in its session, but only under those it does not hold itself, and each once.
Counted in full, a short reply right after a message ("Noted: the session lifetime, 30
minutes.") held the message's words twice and outranked the message that said them, which
cost message-level recall its first place (docs/benchmarks.md, "Message-level benchmarks")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import Principal
from quipu.core.scopes import resolve_scope
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.retrieval.bm25 import TOKENIZER_VERSION, indexed_keys
from quipu.storage.sqlite.store import SQLiteStore

STATED = "For the record: the session lifetime is 30 minutes."
ECHO = "Noted: the session lifetime, 30 minutes."


def test_issue31_indexed_keys_add_each_missing_context_key_once() -> None:
    assert indexed_keys(["a", "b", "a"], ["b", "c", "c", "d"]) == ["a", "b", "a", "c", "d"]
    assert indexed_keys([], ["x", "x"]) == ["x"]
    assert indexed_keys(["x"], []) == ["x"]


def test_issue31_a_message_outranks_the_echo_written_after_it(
    service: MemoryService, alice: Principal
) -> None:
    service.remember(alice, STATED, session_id="s-1")
    service.remember(alice, ECHO, session_id="s-1")
    ref = resolve_scope(alice, "agent")
    found, _ = service.store.text_candidates(ref, "session lifetime", Filters(), 10)
    loaded = service.store.load([c.key for c in found])
    assert [loaded[c.key].text for c in found] == [STATED, ECHO]
    # the echo keeps the context it lacks: a word only the message holds still finds both
    found, _ = service.store.text_candidates(ref, "record", Filters(), 10)
    assert len(found) == 2


def test_issue31_keys_stored_by_the_previous_version_are_recomputed(
    tmp_path: Path, local_embedder: LocalEmbedder, alice: Principal
) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    service = MemoryService(store, local_embedder, Limits())
    service.remember(alice, STATED, session_id="s-1")
    service.remember(alice, ECHO, session_id="s-1")
    store.close()
    with sqlite3.connect(path) as raw:  # what version 2 stored: the context counted in full
        raw.execute(
            "UPDATE memory_versions SET terms = terms || ' record session lifetim 30 minut'"
            " WHERE text = ?",
            (ECHO,),
        )
        raw.execute("UPDATE store_meta SET value = '2' WHERE key = 'terms_version'")
    store = SQLiteStore(path)
    ref = resolve_scope(alice, "agent")
    found, _ = store.text_candidates(ref, "session lifetime", Filters(), 10)
    loaded = store.load([c.key for c in found])
    assert [loaded[c.key].text for c in found] == [STATED, ECHO]
    with sqlite3.connect(path) as raw:
        (terms,) = raw.execute(
            "SELECT terms FROM memory_versions WHERE text = ?", (ECHO,)
        ).fetchone()
        (version,) = raw.execute(
            "SELECT value FROM store_meta WHERE key = 'terms_version'"
        ).fetchone()
    assert terms.split().count("session") == 1 and "record" in terms.split()
    assert version == TOKENIZER_VERSION
    store.close()
