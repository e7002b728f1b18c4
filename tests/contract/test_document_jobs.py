"""Large documents through a durable job on every backend (issue 28, DOC-1, JOB-1): above
``document_job_chars`` an add is checked, chunked and screened in the call and embedded by an
``ingest_document`` job with progress; a duplicate submission returns the running job; a job
run twice writes once; a cancelled job writes nothing; every refusal happens before anything
is queued."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from quipu.core.jobs import JobStatus
from quipu.core.records import Principal
from quipu.documents import DocumentService
from quipu.errors import Conflict, InvalidInput, NotFound, SecretDetected
from quipu.jobs.ingest import INGEST_DOCUMENT, DocumentIngest
from quipu.jobs.queue import JobQueue, LeaseLost
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService

SECTION = (
    "## Section {n}\n\nThe pump's valve number {n} is inspected every {n} days; its seal is "
    "replaced when the gauge reads below the red mark. Operators log each inspection in the "
    "maintenance book with the date, the gauge reading and their initials.\n\n"
)
#: About 6,600 characters: 24 chunks (a heading starts each), three batches of 8.
BODY = "".join(SECTION.format(n=n) for n in range(24))
SECRET = "## Keys\n\nThe controller's access key is AKIAIOSFODNN7EXAMPLE, rotate it.\n\n"


@pytest.fixture
def world(service: MemoryService) -> tuple[DocumentIngest, JobQueue, Worker]:
    service.limits = replace(service.limits, document_job_chars=2_000)
    docs = DocumentService(service, embed_batch=8)
    ingest = DocumentIngest(docs)
    queue = JobQueue(service.store)
    return ingest, queue, Worker(queue, {INGEST_DOCUMENT: ingest.run})


def _submit(ingest: DocumentIngest, who: Principal, text: str = BODY, **kw: Any) -> dict[str, Any]:
    return ingest.submit(who, text, title=kw.pop("title", "Pump log"), **kw)


def test_doc_001_a_large_document_is_ingested_by_a_job_with_progress(
    world: tuple[DocumentIngest, JobQueue, Worker], alice: Principal
) -> None:
    ingest, queue, worker = world
    assert ingest.is_large(BODY) and not ingest.is_large(BODY[:2_000])
    queued = _submit(ingest, alice, BODY + SECRET, media_type="text/markdown")
    job, document_id = queued["job"], queued["document_id"]
    assert job["kind"] == INGEST_DOCUMENT and job["status"] == "queued" and queued["created"]
    assert queued["chunks"] == 25 and [r["reason"] for r in queued["refused"]] == ["aws_access_key"]
    # the refused chunk's text never reaches the queue
    stored = queue.store.get_job(job["job_id"])
    assert stored is not None and "AKIA" not in str(stored.payload)
    before = ingest.progress(alice, job["job_id"])
    assert (before["status"], before["embedded"], before["total"]) == ("queued", 0, 24)
    with pytest.raises(NotFound):  # not there until the job wrote it
        ingest.documents.get(alice, document_id)

    assert worker.drain() == 1
    after = ingest.progress(alice, job["job_id"])
    assert (after["status"], after["embedded"], after["total"]) == ("succeeded", 24, 24)
    assert after["result"] == {
        "document_id": document_id,
        "chunks": 25,
        "served": 24,
        "written": True,
    }
    document = ingest.documents.get(alice, document_id)
    assert (document.chars, document.chunks, document.title) == (len(BODY + SECRET), 25, "Pump log")
    read = ingest.documents.read(alice, document_id, start=0, end=len(BODY))
    assert read["text"] == BODY  # verbatim
    hits = ingest.documents.search(alice, "how often is valve number 17 inspected?", k=3)
    assert hits["results"][0]["document_id"] == document_id


def test_doc_001_ingest_is_idempotent(
    world: tuple[DocumentIngest, JobQueue, Worker], alice: Principal
) -> None:
    ingest, queue, _ = world
    first = _submit(ingest, alice)
    again = _submit(ingest, alice)  # the same submission while its job is queued
    assert again["job"]["job_id"] == first["job"]["job_id"] and not again["created"]
    assert again["document_id"] == first["document_id"]
    other = _submit(ingest, alice, title="Another log")
    assert other["job"]["job_id"] != first["job"]["job_id"]
    lease = queue.claim([INGEST_DOCUMENT], "w1")
    assert lease is not None and lease.job.job_id == first["job"]["job_id"]
    assert ingest.run(lease)["written"] is True
    # a second run of the same job (its worker died after the write) writes nothing more
    assert ingest.run(lease) == {
        "document_id": first["document_id"],
        "chunks": 24,
        "written": False,
    }
    listed = ingest.documents.list(alice)["items"]
    assert [d["id"] for d in listed] == [first["document_id"]]


def test_job_001_a_cancelled_ingest_writes_nothing(
    world: tuple[DocumentIngest, JobQueue, Worker], alice: Principal
) -> None:
    ingest, queue, worker = world
    running = _submit(ingest, alice)
    lease = queue.claim([INGEST_DOCUMENT], "w1")
    assert lease is not None
    queue.cancel(running["job"]["job_id"])  # while it runs: its next heartbeat loses the lease
    with pytest.raises(LeaseLost):
        ingest.run(lease)
    waiting = _submit(ingest, alice, title="Queued log")
    queue.cancel(waiting["job"]["job_id"])  # before it runs: never claimed
    assert worker.drain() == 0
    assert ingest.documents.list(alice)["items"] == []
    cancelled = ingest.progress(alice, waiting["job"]["job_id"])
    assert cancelled["status"] == JobStatus.CANCELLED.value


def test_safe_005_an_ingest_is_refused_before_anything_is_queued(
    world: tuple[DocumentIngest, JobQueue, Worker], alice: Principal, bob: Principal
) -> None:
    ingest, queue, _ = world
    refusals: list[tuple[type[Exception], dict[str, Any]]] = [
        (InvalidInput, {"title": ""}),
        (InvalidInput, {"title": "x" * 501}),
        (InvalidInput, {"media_type": "application/x-sh"}),
        (InvalidInput, {"scope": "galaxy"}),
        (InvalidInput, {"metadata": {"a": "x\ud800"}}),
        (SecretDetected, {"title": "key AKIAIOSFODNN7EXAMPLE"}),
        (InvalidInput, {"text": BODY + "\x00"}),
    ]
    for error, kw in refusals:
        with pytest.raises(error):
            _submit(ingest, alice, kw.pop("text", BODY), **kw)
    assert queue.store.list_jobs(alice.tenant_id, None, 10) == []
    queued = _submit(ingest, alice)
    with pytest.raises(NotFound):  # another caller cannot follow it
        ingest.progress(bob, queued["job"]["job_id"])
    with pytest.raises(InvalidInput):
        ingest.progress(alice, "../x")


def test_doc_001_a_mismatched_corpus_refuses_the_ingest_in_the_call(
    world: tuple[DocumentIngest, JobQueue, Worker], alice: Principal
) -> None:
    ingest, queue, _ = world
    store = ingest.store
    from quipu.core.scopes import resolve_scope
    from quipu.storage.base import EmbeddingPin

    ref = resolve_scope(alice, "agent")
    dim = ingest.documents.embedder.dimension
    ingest.documents.add(alice, "A short note.", title="Note")
    corpus = store.doc_corpus(ref)
    assert corpus is not None and corpus[0] == EmbeddingPin(ingest.documents.embedder.model_id, dim)
    ingest.documents.embedder = _Renamed(ingest.documents.embedder)
    with pytest.raises(Conflict) as refused:
        _submit(ingest, alice)
    assert refused.value.code == "corpus_model_mismatch"
    assert queue.store.list_jobs(alice.tenant_id, None, 10) == []


class _Renamed:
    """The real model under another id: what a model change looks like to a pinned corpus."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id + "-v2"
        self.dimension = inner.dimension

    def embed_batch(self, texts: list[str]) -> Any:
        return self.inner.embed_batch(texts)
