"""SQLite scope index files (issue 23, finding 3): a process that loaded a scope writes its
index beside the database; the next process maps it instead of loading the scope again, a
write by another process moves the scope past the file (replayed from ``scope_log``, or the
scope reloaded), and a file never answers for another store, tenant or scope (SCOPE-7,
RECALL-5: answers identical to an index loaded from the rows)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from quipu.core.limits import Limits
from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.embeddings.local import LocalEmbedder
from quipu.memories import MemoryService
from quipu.storage.sqlite import index_file
from quipu.storage.sqlite.store import SQLiteStore

ALICE = Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")
BOB = Principal("t2", "key-bob", Role.AGENT, agent_id="alice", user_id="u-bob")
QUERIES = ["where does Dana sit?", "what does Sam drink", "the deployment failed", "hiking"]
TEXTS = [
    "Dana prefers window seats",
    "Sam drinks oat milk flat whites",
    "The deployment failed twice on Tuesday",
    "We went hiking near the lake in May",
    "The quarterly report is due on Friday",
]


def _answers(svc: MemoryService, who: Principal = ALICE) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.memory.id, h.memory.version, round(h.score, 6)) for h in svc.recall(who, q)]
        for q in QUERIES
    ]


def _open(path: Path, embedder: LocalEmbedder, *, files: bool = True) -> MemoryService:
    return MemoryService(SQLiteStore(path, index_files=files), embedder, Limits())


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder) -> Path:
    """A store with two tenants writing the same texts, each scope's index file written."""
    path = tmp_path_factory.mktemp("index-files") / "shared.db"
    writer = _open(path, local_embedder)
    for text in TEXTS:
        writer.remember(ALICE, text)
        writer.remember(BOB, f"{text} (bob)")
    _answers(writer)
    _answers(writer, BOB)
    writer.store.close()
    return path


def _copy(seeded: Path, tmp_path: Path) -> Path:
    path = tmp_path / "shared.db"
    shutil.copy(seeded, path)
    shutil.copytree(seeded.parent / "shared.db-index", tmp_path / "shared.db-index")
    return path


def test_recall_5_issue23_a_second_process_maps_the_file(
    seeded: Path, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """A fresh Python process answers from the file (no scope loaded from the rows), with the
    same hits, versions and scores as an index loaded from the rows."""
    path = _copy(seeded, tmp_path)
    script = (
        "import json, sys\n"
        "from quipu.core.records import Scope, ScopeRef\n"
        "from quipu.storage.sqlite.store import SQLiteStore\n"
        "store = SQLiteStore(sys.argv[1])\n"
        "found, info = store.text_candidates(ScopeRef('t1', Scope.AGENT, 'alice'), 'Dana seats',"
        " __import__('quipu.core.query', fromlist=['Filters']).Filters(), 5)\n"
        "print(json.dumps({'mapped': store.mapped, 'rebuilds': store.rebuilds,"
        " 'keys': [c.key for c in found]}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout)
    assert seen["mapped"] == 1 and seen["rebuilds"] == 0 and seen["keys"]
    mapped = _open(path, local_embedder)
    assert _answers(mapped) == _answers(_open(path, local_embedder, files=False))
    assert mapped.store.mapped == 1 and mapped.store.rebuilds == 0  # type: ignore[attr-defined]


def test_issue23_a_write_by_another_process_moves_the_scope_past_its_file(
    seeded: Path, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    path = _copy(seeded, tmp_path)
    other = _open(path, local_embedder, files=False)  # writes, leaves the file as it was
    written = other.remember(ALICE, "Dana's flight to Lisbon leaves at 9").memory
    replayed = _open(path, local_embedder)
    hits = [h.memory.id for h in replayed.recall(ALICE, "when does Dana's flight leave?")]
    assert written.id in hits
    assert replayed.store.mapped == 1 and replayed.store.catch_ups == 1  # type: ignore[attr-defined]

    other.remember(ALICE, "Sam switched to black coffee")
    with sqlite3.connect(path) as raw:  # as if the log were pruned: the file cannot catch up
        raw.execute("DELETE FROM scope_log")
    reloaded = _open(path, local_embedder)
    assert _answers(reloaded) == _answers(_open(path, local_embedder, files=False))
    assert reloaded.store.rebuilds == 1 and reloaded.store.mapped == 0  # type: ignore[attr-defined]


def test_scope_7_issue23_a_file_never_answers_for_another_scope_or_store(
    seeded: Path, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    path = _copy(seeded, tmp_path)
    folder = tmp_path / "shared.db-index"
    alice = index_file.file_for(folder, ScopeRef("t1", Scope.AGENT, "alice"))
    bob = index_file.file_for(folder, ScopeRef("t2", Scope.AGENT, "alice"))
    shutil.copy(alice, bob)  # tenant t1's file where tenant t2's belongs
    svc = _open(path, local_embedder)
    texts = [h.memory.text for q in QUERIES for h in svc.recall(BOB, q)]
    assert texts and all(t.endswith("(bob)") for t in texts)
    assert svc.store.mapped == 0 and svc.store.rebuilds == 1  # type: ignore[attr-defined]

    elsewhere = tmp_path / "other" / "shared.db"  # another store, given this store's files
    fresh = _open(elsewhere, local_embedder)
    mine = fresh.remember(ALICE, "Dana prefers window seats").memory
    fresh.store.close()
    shutil.rmtree(elsewhere.parent / "shared.db-index")
    shutil.copytree(folder, elsewhere.parent / "shared.db-index")
    reopened = _open(elsewhere, local_embedder)
    assert {h.memory.id for q in QUERIES for h in reopened.recall(ALICE, q)} == {mine.id}
    assert reopened.store.mapped == 0  # type: ignore[attr-defined]


def test_issue23_storage_bytes_counts_the_index_folder(seeded: Path, tmp_path: Path) -> None:
    """``storage_bytes()`` is the database's files and its ``<database>-index/`` folder: the
    scope files are on disk because of the store (a 100k scope's is ~175 MB)."""
    path = _copy(seeded, tmp_path)
    folder = tmp_path / "shared.db-index"
    store = SQLiteStore(path)
    try:
        database = sum(p.stat().st_size for p in tmp_path.glob("shared.db*") if p.is_file())
        kept = sum(p.stat().st_size for p in folder.iterdir())
        assert kept > 0 and any(p.name.endswith(".scope") for p in folder.iterdir())
        assert store.storage_bytes() == database + kept
    finally:
        store.close()
