"""/v1/documents: the documents plane (DOC-1). Add a document (its text kept as verbatim
chunks), search one scope's corpus for pointers and snippets, read a bounded range, get, list
and delete; each call reads or writes exactly one scope (``scope``, default ``agent``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from quipu.core.records import Principal
from quipu.documents import DocumentService
from quipu.documents_pdf import pdf_bytes, pdf_media
from quipu.jobs.ingest import DocumentIngest
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.plane_responses import (
    DocumentAddOut,
    DocumentEraseOut,
    DocumentJobOut,
    DocumentOut,
    DocumentPageOut,
    DocumentTextOut,
    PointersOut,
)
from quipu.surfaces.http.schemas import Body

router = APIRouter(prefix="/v1", tags=["documents"])
Json = dict[str, Any]
Who = Annotated[Principal, Depends(principal)]
ScopeParam = Annotated[str, Query(description="agent, user, agent_user, tenant or global.")]


async def documents(request: Request) -> DocumentService:
    """The documents use cases over the app's memory service, built on first use (they keep
    each corpus's search index in this process). Async: it does no I/O."""
    found: DocumentService | None = getattr(request.app.state, "documents", None)
    if found is None:
        found = request.app.state.documents = DocumentService(request.app.state.service)
    return found


Docs = Annotated[DocumentService, Depends(documents)]


class AddBody(Body):
    content: str = Field(
        description="The document: plain text, Markdown or HTML; for application/pdf the "
        "file's bytes in base64."
    )
    title: str = Field(description="A title, at most 500 characters.")
    media_type: str = Field("text/plain", description="text/plain, text/markdown or text/html.")
    scope: str = Field("agent", description="The scope whose corpus takes the document.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None


class SearchBody(Body):
    query: Any = Field(description="The question, at most max_query_chars characters.")
    scope: str = "agent"
    k: int | None = Field(None, description="How many pointers (default_k when absent).")


class DeleteBody(Body):
    reason: str | None = Field(None, description="Why; audited, never in a URL.")


@router.post(
    "/documents",
    response_model=DocumentAddOut,
    status_code=201,
    summary="Add a document",
    responses={202: {"description": "A large document, queued as an ingest_document job"}},
)
def add_document(body: AddBody, docs: Docs, who: Who) -> SafeJSONResponse:
    ingest = DocumentIngest(docs)
    content: object = body.content
    if pdf_media(body.media_type):
        content = pdf_bytes(body.content)
    if ingest.is_large(content):  # longer than document_job_chars: a durable job
        queued = ingest.submit(
            who,
            content,
            title=body.title,
            media_type=body.media_type,
            scope=body.scope,
            metadata=body.metadata,
            reason=body.reason,
        )
        return SafeJSONResponse(queued, status_code=202)
    added = docs.add(
        who,
        content,
        title=body.title,
        media_type=body.media_type,
        scope=body.scope,
        metadata=body.metadata,
        reason=body.reason,
    )
    return SafeJSONResponse(added, status_code=201)


@router.get("/documents", response_model=DocumentPageOut, summary="List the documents of one scope")
def list_documents(
    docs: Docs,
    who: Who,
    scope: ScopeParam = "agent",
    cursor: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> SafeJSONResponse:
    return SafeJSONResponse(docs.list(who, scope=scope, cursor=cursor, limit=limit))


@router.post(
    "/documents/search", response_model=PointersOut, summary="Search one scope's documents"
)
def search_documents(body: SearchBody, docs: Docs, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(docs.search(who, body.query, scope=body.scope, k=body.k))


@router.get("/documents/{document_id}", response_model=DocumentOut, summary="A document's record")
def get_document(
    document_id: str, docs: Docs, who: Who, scope: ScopeParam = "agent"
) -> SafeJSONResponse:
    return SafeJSONResponse(docs.get(who, document_id, scope=scope).to_dict())


@router.get(
    "/documents/{document_id}/text", response_model=DocumentTextOut, summary="Read a bounded range"
)
def read_document(
    document_id: str,
    docs: Docs,
    who: Who,
    start: int = 0,
    end: int | None = None,
    scope: ScopeParam = "agent",
) -> SafeJSONResponse:
    return SafeJSONResponse(docs.read(who, document_id, start=start, end=end, scope=scope))


@router.post(
    "/documents/{document_id}/delete",
    response_model=DocumentOut,
    summary="Delete a document (logical)",
)
def delete_document(
    document_id: str,
    docs: Docs,
    who: Who,
    scope: ScopeParam = "agent",
    body: DeleteBody | None = None,
) -> SafeJSONResponse:
    given = body or DeleteBody()
    return SafeJSONResponse(
        docs.delete(who, document_id, scope=scope, reason=given.reason).to_dict()
    )


class EraseBody(Body):
    reason: str = Field(description="Why (required; audited).")


@router.post(
    "/documents/{document_id}/erase",
    response_model=DocumentEraseOut,
    summary="Erase a document's text (compliance)",
)
def erase_document(
    document_id: str, body: EraseBody, docs: Docs, who: Who, scope: ScopeParam = "agent"
) -> SafeJSONResponse:
    return SafeJSONResponse(docs.erase(who, document_id, scope=scope, reason=body.reason))


@router.get(
    "/document-jobs/{job_id}",
    response_model=DocumentJobOut,
    summary="Follow a large document's ingest job",
)
def document_job(job_id: str, docs: Docs, who: Who) -> SafeJSONResponse:
    return SafeJSONResponse(DocumentIngest(docs).progress(who, job_id))
