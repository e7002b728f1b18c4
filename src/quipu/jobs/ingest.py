"""Large documents through a durable job (DOC-1, JOB-1): ``ingest_document``.

A document whose text is longer than :attr:`Limits.document_job_chars` is not embedded in the
request. :meth:`DocumentIngest.submit` does everything else of an add in the call — the checks,
the cutting into chunks, the secret and injection screen, so every refusal is still the
caller's 4xx — and queues a job whose payload holds the screened chunks (a refused chunk's text
is never in it) and the document's record. The worker embeds the chunks in batches, each batch
one heartbeat whose checkpoint is the progress (``{embedded, total}``), and writes the document
in one transaction at the end.

Idempotent: the same submission (scope, title, media type and content) while its job is queued
or running returns that job; a job run twice (a worker died, a retry) writes its document once,
under the id fixed at submission. Cancelled like any job (``POST /v1/jobs/{id}/cancel``): the
next heartbeat loses the lease and nothing is written.
"""

from __future__ import annotations

import hashlib
from typing import Any

from quipu.core import validate
from quipu.core.documents import (
    Chunk,
    ChunkStatus,
    Document,
    DocumentStatus,
    MediaType,
    check_corpus,
)
from quipu.core.jobs import Job, NewJob
from quipu.core.records import Principal, Role, Scope, ScopeRef
from quipu.core.sessions import session_owner
from quipu.documents import DocumentService, Prepared
from quipu.errors import NotFound
from quipu.jobs.queue import Lease

INGEST_DOCUMENT = "ingest_document"


class DocumentIngest:
    """Submitting a large document as a job, and the job's handler."""

    def __init__(self, documents: DocumentService) -> None:
        self.documents = documents
        self.store = documents.store

    def threshold(self) -> int:
        return self.documents.limits.document_job_chars

    def is_large(self, content: object) -> bool:
        """Whether an add of ``content`` goes through a job (its length alone decides, so a
        caller knows before sending; HTML is measured as sent)."""
        return isinstance(content, str) and len(content) > self.threshold()

    def submit(
        self,
        principal: Principal,
        content: object,
        *,
        title: object,
        media_type: object = "text/plain",
        scope: str = "agent",
        metadata: object = None,
        reason: object = None,
    ) -> dict[str, Any]:
        """Queue the ingest of a document; ``{job, document_id, created, chunks, refused,
        quarantined}``. Every refusal of an add happens here, before anything is queued."""
        prepared = self.documents.prepare(
            principal,
            content,
            title=title,
            media_type=media_type,
            scope=scope,
            metadata=metadata,
            reason=reason,
        )
        ref, document, chunks = prepared
        corpus = self.store.doc_corpus(ref)
        if corpus is not None:  # refuse a mismatched corpus now, not in the worker
            check_corpus((corpus[0].model_id, corpus[0].dimension), _model(self.documents))
        digest = hashlib.sha256(
            "\x1f".join(
                (ref.scope.value, ref.owner, document.title, document.media_type.value)
            ).encode()
            + b"\x1f"
            + str(content).encode("utf-8", "surrogatepass")
        ).hexdigest()
        job, created = self.store.enqueue_job(
            NewJob(
                principal.tenant_id, INGEST_DOCUMENT, f"doc:{digest}", _payload(principal, prepared)
            ),
            self.documents._clock(),
        )
        withheld = document.withheld
        return {
            "job": job.to_dict(),
            "created": created,
            "document_id": str(job.payload["document"]["id"]),
            "chunks": len(chunks),
            "refused": [w for w in withheld if w["status"] == "refused"],
            "quarantined": [w for w in withheld if w["status"] == "quarantined"],
        }

    def progress(self, principal: Principal, job_id: object) -> dict[str, Any]:
        """An ingest job as its submitter (or an admin of its tenant) follows it:
        ``{job_id, document_id, status, embedded, total, attempts, last_error, result}``.
        Anyone else's, or another kind of job, is 404 like a missing one (SCOPE-7)."""
        ident = validate.identifier(job_id, field="job_id")
        job = self.store.get_job(ident)
        admin = principal.role in (Role.ADMIN, Role.SUPERADMIN)
        if (
            job is None
            or job.kind != INGEST_DOCUMENT
            or job.tenant_id != principal.tenant_id
            or not (admin or job.payload.get("principal", {}).get("key_id") == principal.key_id)
        ):
            raise NotFound(f"no document job {ident}", details={"job_id": ident})
        return {
            "job_id": job.job_id,
            "document_id": job.payload["document"]["id"],
            "status": job.status.value,
            "embedded": job.checkpoint.get("embedded", 0),
            "total": job.checkpoint.get(
                "total", sum(c[3] == "active" for c in job.payload["chunks"])
            ),
            "attempts": job.attempts,
            "last_error": job.last_error,
            "result": job.result,
        }

    def run(self, lease: Lease) -> dict[str, Any]:
        """The job's handler: embed in batches (one heartbeat each), then write once."""
        principal, prepared = _unpack(lease.job)
        ref, document, chunks = prepared
        found = self.store.doc_get(ref, document.id)
        if found is not None:  # a second run of a job whose write went through
            return {"document_id": document.id, "chunks": found.chunks, "written": False}
        total = sum(c.status is ChunkStatus.ACTIVE for c in chunks)
        lease.heartbeat({"embedded": 0, "total": total})
        vectors = self.documents.embed(
            chunks, lambda n: lease.heartbeat({"embedded": n, "total": total})
        )
        lease.heartbeat({"embedded": total, "total": total, "writing": True})
        added = self.documents.commit(principal, prepared, vectors)
        return {
            "document_id": document.id,
            "chunks": added["chunks"],
            "served": added["served"],
            "written": True,
        }


def _model(documents: DocumentService) -> tuple[str, int]:
    embedder = documents._embedder()
    return str(embedder.model_id), int(embedder.dimension)


def _payload(principal: Principal, prepared: Prepared) -> dict[str, Any]:
    ref, d, chunks = prepared
    return {
        "principal": {
            "key_id": principal.key_id,
            "role": principal.role.value,
            "agent_id": principal.agent_id,
            "user_id": principal.user_id,
            "surface": principal.surface,
        },
        # ``owner`` lets the submitter read the job at GET /v1/jobs/{id} (jobs.visibility)
        "owner": session_owner(principal),
        "scope": ref.scope.value,
        "scope_owner": ref.owner,
        "document": {
            "id": d.id,
            "title": d.title,
            "media_type": d.media_type.value,
            "metadata": d.metadata,
            "chars": d.chars,
            "reason": d.reason,
            "embedding_model": d.embedding_model,
        },
        # [seq, start, end, status, reason, text]: a refused chunk's text is already empty
        "chunks": [[c.seq, c.start, c.end, c.status.value, c.reason, c.text] for c in chunks],
    }


def _unpack(job: Job) -> tuple[Principal, Prepared]:
    p = job.payload
    who = p["principal"]
    principal = Principal(
        job.tenant_id,
        str(who["key_id"]),
        Role(who["role"]),
        agent_id=who.get("agent_id"),
        user_id=who.get("user_id"),
        surface=str(who.get("surface") or "job"),
    )
    ref = ScopeRef(job.tenant_id, Scope(p["scope"]), str(p["scope_owner"]))
    chunks = tuple(
        Chunk(int(c[0]), int(c[1]), int(c[2]), str(c[5]), ChunkStatus(c[3]), c[4])
        for c in p["chunks"]
    )
    d = p["document"]
    document = Document(
        id=str(d["id"]),
        tenant_id=job.tenant_id,
        scope=ref.scope,
        owner=ref.owner,
        title=str(d["title"]),
        media_type=MediaType(d["media_type"]),
        metadata=dict(d["metadata"]),
        chars=int(d["chars"]),
        chunks=len(chunks),
        status=DocumentStatus.ACTIVE,
        version=1,
        actor=principal.key_id,
        surface=principal.surface,
        agent_id=principal.agent_id,
        recorded_at=job.created_at,
        embedding_model=str(d["embedding_model"]),
        reason=d.get("reason"),
        withheld=[
            {
                "seq": c.seq,
                "start": c.start,
                "end": c.end,
                "status": c.status.value,
                "reason": c.reason,
            }
            for c in chunks
            if c.status is not ChunkStatus.ACTIVE
        ],
    )
    return principal, Prepared(ref, document, chunks)
