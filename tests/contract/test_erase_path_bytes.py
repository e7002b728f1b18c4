"""Every erase path leaves no bytes behind the moment it returns (LIFE-4): a distinctive word
written through each field of each plane is in the store's files before, and in none of them
after the erase call — with no checkpoint, VACUUM or reclaim of the test's own.

SQLite: the database, its WAL and shared-memory files and the scope index files, scanned as
bytes (an erase checkpoints the WAL once it commits, and secure delete zeroes freed cells).
PostgreSQL keeps dead row images until VACUUM (``quipu reclaim``, docs/data-lifecycle.md), so
there every column of every table is read as text instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal, Role
from quipu.documents import DocumentService
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.governance.holds import ERASE_PATHS
from quipu.knowledge import KnowledgeService
from quipu.kv import KeyValueService
from quipu.memories import MemoryService
from tests.contract.test_erase_bytes import _column_hits

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="alice", user_id="u-alice")
ALICE = Principal("t1", "key-alice", Role.AGENT, agent_id="alice", user_id="u-alice")
WORD = "qzvbytesword"


def _memory(service: MemoryService, rt: Any) -> Callable[[], object]:
    m = service.remember(
        ALICE,
        f"{WORD.title()} keeps the spare key",
        scope="user",
        tags=[WORD + "tag"],
        metadata={WORD + "k": WORD + "v"},
        aliases=[WORD + " alias"],
        quote=WORD + " quote",
    ).memory
    service.revise(ALICE, m.id, f"{WORD.title()} moved the key", reason=WORD + " reason")
    return lambda: rt.governance.erase(ADMIN, m.id, reason="request 9")


def _kv(service: MemoryService, rt: Any) -> Callable[[], object]:
    kv = KeyValueService(service)
    kv.set(ALICE, "seat", {"v": WORD + "value"}, scope="user", reason=WORD + " reason")
    kv.set(ALICE, "seat", WORD + "second", scope="user")
    return lambda: kv.erase(ADMIN, "seat", scope="user", reason="request 9")


def _documents(service: MemoryService, rt: Any) -> Callable[[], object]:
    docs = DocumentService(service)
    body = f"{WORD.title()} chapter one.\n\n" + "The notes go on. " * 40
    added = docs.add(
        ALICE, body, title=WORD + "title", scope="user", metadata={"k": WORD + "m"}, reason="r"
    )
    ident = added["document"]["id"]
    return lambda: docs.erase(ADMIN, ident, scope="user", reason="request 9")


def _knowledge(service: MemoryService, rt: Any) -> Callable[[], object]:
    knowledge = KnowledgeService(service)
    made = knowledge.create(ADMIN, WORD + " title", f"{WORD.title()} runbook body", tags=[WORD])
    return lambda: knowledge.erase(ADMIN, made.article.id, reason="request 9")


def _subject(service: MemoryService, rt: Any) -> Callable[[], object]:
    service.remember(ALICE, f"{WORD.title()} is the subject's street", scope="user")
    KeyValueService(service).set(ALICE, "desk", WORD + "desk", scope="user")
    DocumentService(service).add(ALICE, f"{WORD.title()} subject notes", title="n", scope="user")
    rt.sessions.append(ALICE, "s-1", "user", f"I live on {WORD.title()} street.")

    def erase() -> object:
        job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="request 9")
        rt.worker.drain()
        done = rt.governance.erasure_job(ADMIN, job.job_id)
        assert done.status.value == "succeeded", done.last_error
        return done

    return erase


WRITERS = {
    "memory": _memory,
    "kv": _kv,
    "documents": _documents,
    "knowledge": _knowledge,
    "subject": _subject,
}


def test_every_erase_path_has_a_byte_scan() -> None:
    assert set(WRITERS) == set(ERASE_PATHS.values())


def _file_hits(folder: Path) -> dict[str, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {p.name: p.read_bytes().lower().count(WORD.encode()) for p in files}


def _pg_hits(service: MemoryService) -> dict[str, int]:
    store: Any = service.store
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        return _column_hits(conn, WORD)


@pytest.mark.parametrize("plane", sorted(WRITERS))
def test_life_004_an_erase_path_leaves_no_bytes_when_it_returns(
    service: MemoryService, backend: str, tmp_path: Path, plane: str
) -> None:
    if backend == "citus":
        pytest.skip("the row scan runs on PostgreSQL; Citus shares its code")
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        service,
        extractor=DeterministicExtractor(),
    )
    erase = WRITERS[plane](service, rt)
    rt.worker.drain()  # what jobs derive from the writes is written too

    def scan() -> dict[str, int]:
        if backend == "sqlite":
            return {k: v for k, v in _file_hits(tmp_path).items() if v}
        return _pg_hits(service)

    assert scan(), "the scan sees the word before the erase"
    erase()
    assert scan() == {}
    rt.close()
