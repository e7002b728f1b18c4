"""Text handed to harvest is kept only while its job needs it (HARVEST-1, LIFE-4): a batch that
has run leaves no span in the job's payload, and a subject erasure empties the spans of a batch
for that subject that has not run yet (it then writes nothing). Scanned as bytes on SQLite
(no checkpoint or VACUUM of the test's own) and as every column's text on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from quipu.composition import build_runtime, load_settings
from quipu.core.records import Principal, Role
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.governance.base import ERASE_SUBJECT
from quipu.harvest import Harvester
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService
from tests.contract.test_erase_bytes import _column_hits

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
WORD = "qzvharvestword"


def _hits(service: MemoryService, backend: str, folder: Path) -> int:
    if backend == "sqlite":
        files = [p for p in folder.rglob("*") if p.is_file()]
        return sum(p.read_bytes().lower().count(WORD.encode()) for p in files)
    store: Any = service.store
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        return sum(_column_hits(conn, WORD).values())


def _job(service: MemoryService, batch_id: str) -> Any:
    (job,) = [j for j in service.store.list_jobs("t1", None, 100) if batch_id in j.idempotency_key]
    return job


def test_life_004_a_batch_that_ran_keeps_no_span(
    service: MemoryService, alice: Principal, backend: str, tmp_path: Path
) -> None:
    harvester = Harvester(service, DeterministicExtractor(), run_jobs=False)
    spans = [f"We talked about {WORD} and the weather.", "Nothing else happened today."]
    receipt = harvester.harvest(alice, spans, boundary="compaction")
    assert receipt.accepted
    assert _job(service, receipt.batch_id).payload["spans"]  # held while the job waits
    harvester._worker.drain()
    done = _job(service, receipt.batch_id)
    assert done.status.value == "succeeded" and done.payload["spans"] == []
    service.store.checkpoint()
    assert _hits(service, backend, tmp_path) == 0
    harvester.close()


def test_life_004_subject_erasure_empties_a_batch_not_yet_run(
    service: MemoryService, alice: Principal, backend: str, tmp_path: Path
) -> None:
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        service,
        extractor=DeterministicExtractor(),
    )
    harvester = Harvester(service, DeterministicExtractor(), run_jobs=False)
    receipt = harvester.harvest(alice, [f"My neighbour {WORD} lives in Oslo."], boundary="recap")
    assert receipt.accepted and _hits(service, backend, tmp_path) > 0
    job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="request 11")
    # only the erasure runs: the batch is still waiting when it does
    Worker(rt.queue, {ERASE_SUBJECT: rt.governance.run_subject_erasure}).drain()
    done = rt.governance.erasure_job(ADMIN, job.job_id)
    assert done.status.value == "succeeded" and done.result["counts"]["job_payloads"] == 1
    assert _hits(service, backend, tmp_path) == 0
    assert _job(service, receipt.batch_id).payload["spans"] == []
    harvester._worker.drain()  # the emptied batch runs and writes nothing
    assert _hits(service, backend, tmp_path) == 0
    harvester.close()
    rt.close()
