"""``Quipu.documents``: the documents plane of the embedded client, with large documents
through the durable ``ingest_document`` job as over HTTP (DOC-1, JOB-1).

A document longer than :attr:`~quipu.core.limits.Limits.document_job_chars` is checked,
chunked and screened in the call (every refusal is still the call's error, nothing queued) and
queued; its chunks are embedded by the job worker in batches with progress, and written in one
transaction. With ``wait=True`` (the default) the call runs due jobs in this thread (the
embedded worker thread may take the job first) and returns when the document is written, in
the same shape as a small add plus ``ingest`` (the job's progress); with ``wait=False`` it
returns at once what ``POST /v1/documents`` answers with 202, and ``documents.job(job_id)``
follows the job. A crash between the two leaves the job queued: the next process's worker
finishes it.
"""

from __future__ import annotations

import time
from typing import Any

from quipu.core.jobs import JobStatus
from quipu.core.records import Principal
from quipu.documents import Documents, DocumentService
from quipu.errors import Unavailable
from quipu.jobs.ingest import DocumentIngest
from quipu.jobs.worker import Worker

#: How long ``add(wait=True)`` waits for a large document's job, in seconds.
WAIT_SECONDS = 600.0
_ENDED = {JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value}


class LibraryDocuments(Documents):
    """:class:`quipu.documents.Documents` whose large adds go through the ingest job."""

    def __init__(self, service: DocumentService, principal: Principal, worker: Worker) -> None:
        super().__init__(service, principal)
        self.worker = worker
        self.ingest = DocumentIngest(service)

    def add(
        self,
        content: str | bytes,
        *,
        title: str,
        media_type: str = "text/plain",
        scope: str = "agent",
        metadata: dict[str, Any] | None = None,
        reason: str | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "title": title,
            "media_type": media_type,
            "scope": scope,
            "metadata": metadata,
            "reason": reason,
        }
        if not self.ingest.is_large(content):
            return super().add(content, **fields)
        queued = self.ingest.submit(self.principal, content, **fields)
        if not wait:
            return queued
        progress = self._wait(str(queued["job"]["job_id"]))
        if progress["status"] != JobStatus.SUCCEEDED.value:
            if progress["status"] in _ENDED:
                raise Unavailable(
                    f"the ingest job of document {queued['document_id']} {progress['status']}",
                    code="ingest_failed",
                    details={"job_id": progress["job_id"], "last_error": progress["last_error"]},
                )
            return {**queued, "ingest": progress}  # still running elsewhere: follow job()
        document = self.service.get(self.principal, queued["document_id"], scope=scope)
        return {
            "document": document.to_dict(),
            "chunks": document.chunks,
            "served": document.chunks - len(document.withheld),
            "refused": queued["refused"],
            "quarantined": queued["quarantined"],
            "ingest": progress,
        }

    def job(self, job_id: str) -> dict[str, Any]:
        """A large document's ingest job as its submitter follows it (``GET
        /v1/document-jobs/{job_id}``): ``{job_id, document_id, status, embedded, total,
        attempts, last_error, result}``."""
        return self.ingest.progress(self.principal, job_id)

    def _wait(self, job_id: str) -> dict[str, Any]:
        self.worker.drain()
        deadline, pause = time.monotonic() + WAIT_SECONDS, 0.01
        while True:
            progress = self.job(job_id)
            if progress["status"] in _ENDED or time.monotonic() >= deadline:
                return progress
            time.sleep(pause)
            pause = min(0.5, pause * 2)
            self.worker.drain()
