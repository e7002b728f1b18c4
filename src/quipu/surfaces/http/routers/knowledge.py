"""Knowledge and merged-recall routes (issue 25: KNOW-1, KNOW-2, RECALL-9): articles with the
novelty gate's verdict as the status (201 created or gated to a draft, 200 deduplicated or
updated), search, history, erase, ``/v1/context`` and its ``referenced`` follow-up. Each calls
:class:`~quipu.knowledge.KnowledgeService` or :class:`~quipu.recall_context.MergedRecall`;
the same codes as the library and MCP."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from quipu.article_candidates import ArticleCandidates
from quipu.core.records import Principal
from quipu.knowledge import KnowledgeService
from quipu.recall_context import MergedRecall
from quipu.surfaces.http.deps import principal
from quipu.surfaces.http.encoding import SafeJSONResponse
from quipu.surfaces.http.plane_responses import (
    ArticleCandidateJudgedOut,
    ArticleCandidatePageOut,
    ArticleEraseOut,
    ArticleHistoryOut,
    ArticleOut,
    ArticlePageOut,
    ArticleSearchOut,
    ArticleWriteOut,
    ContextOut,
    GraduateOut,
    ReferencedOut,
)
from quipu.surfaces.http.schemas import Body
from quipu.usage import Graduation

router = APIRouter(prefix="/v1", tags=["knowledge"])
Json = dict[str, Any]
Who = Annotated[Principal, Depends(principal)]


async def merged_recall(request: Request) -> MergedRecall:
    """The app's merged recall (and knowledge use cases), made on first use over the app's
    memory service. Async: it does no I/O."""
    found: MergedRecall | None = getattr(request.app.state, "merged_recall", None)
    if found is None:
        found = request.app.state.merged_recall = MergedRecall(
            KnowledgeService(request.app.state.service)
        )
    return found


Merged = Annotated[MergedRecall, Depends(merged_recall)]


class ArticleBody(Body):
    title: str = Field(description="Unique in the tenant, case-folded (at most 200 characters).")
    body: str = Field(description="Markdown (at most 32 KiB; secrets are refused).")
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    project: str | None = None
    visibility: Literal["tenant", "owner"] = "tenant"
    status: Literal["draft", "published"] = "published"


class ArticleChange(Body):
    expected_version: int | None = Field(
        None, description="The version you read (required, LIFE-2: 428 without)."
    )
    title: str | None = None
    body: str | None = None
    category: str | None = None
    tags: list[str] | None = None
    visibility: Literal["tenant", "owner"] | None = None
    status: Literal["draft", "published"] | None = None
    reason: str | None = None


class SearchBody(Body):
    query: str
    k: int | None = None
    category: str | None = None
    tags: list[str] | None = None
    project: str | None = None


class EraseBody(Body):
    reason: str = Field(description="Why (required; audited).")


class ContextBody(Body):
    query: str
    scopes: list[str] = Field(default_factory=lambda: ["agent"])
    include_knowledge: bool = True
    budget_tokens: int = 2000
    session_id: str | None = Field(None, description="Opaque, at most 200 bytes.")
    k: int | None = None
    project: str | None = None
    diversity: dict[str, Any] | None = Field(
        None, description="enabled, lambda, near_dup_threshold, over_fetch, max_pool."
    )


class ReferencedBody(Body):
    ids: list[Any] = Field(description="1-50 ids of rows that recall surfaced to you.")


@router.post(
    "/knowledge",
    summary="Write an article through the novelty gate",
    response_model=ArticleWriteOut,
    status_code=201,
    responses={200: {"description": "An exact duplicate: the existing article (deduplicated)"}},
)
def create_article(body: ArticleBody, merged: Merged, who: Who) -> SafeJSONResponse:
    result = merged.knowledge.create(
        who,
        body.title,
        body.body,
        category=body.category,
        tags=body.tags,
        project=body.project,
        visibility=body.visibility,
        status=body.status,
    )
    return SafeJSONResponse(result.to_dict(), status_code=201 if result.created else 200)


@router.post(
    "/knowledge/search", summary="Search knowledge articles", response_model=ArticleSearchOut
)
def search_articles(body: SearchBody, merged: Merged, who: Who) -> SafeJSONResponse:
    found = merged.knowledge.search(
        who, body.query, k=body.k, category=body.category, tags=body.tags, project=body.project
    )
    return SafeJSONResponse(found.to_dict())


@router.get("/knowledge/{article_id}", summary="Read an article", response_model=ArticleOut)
def get_article(
    article_id: str,
    merged: Merged,
    who: Who,
    as_of: Annotated[str | None, Query(description="ISO 8601 instant.")] = None,
) -> SafeJSONResponse:
    return SafeJSONResponse(merged.knowledge.get(who, article_id, as_of=as_of).to_dict())


@router.get(
    "/knowledge/{article_id}/history",
    summary="Every version of an article",
    response_model=ArticleHistoryOut,
)
def article_history(article_id: str, merged: Merged, who: Who) -> SafeJSONResponse:
    versions = merged.knowledge.history(who, article_id)
    return SafeJSONResponse({"items": [v.to_dict() for v in versions]})


@router.patch(
    "/knowledge/{article_id}",
    summary="Change an article",
    response_model=ArticleWriteOut,
    responses={201: {"description": "The change was gated into a new draft (gated_to_draft)"}},
)
def update_article(
    article_id: str, body: ArticleChange, merged: Merged, who: Who
) -> SafeJSONResponse:
    result = merged.knowledge.update(
        who,
        article_id,
        expected_version=body.expected_version,
        title=body.title,
        body=body.body,
        category=body.category,
        tags=body.tags,
        visibility=body.visibility,
        status=body.status,
        reason=body.reason,
    )
    return SafeJSONResponse(result.to_dict(), status_code=201 if result.created else 200)


@router.post(
    "/knowledge/{article_id}/erase", summary="Erase an article", response_model=ArticleEraseOut
)
def erase_article(article_id: str, body: EraseBody, merged: Merged, who: Who) -> SafeJSONResponse:
    erased = merged.knowledge.erase(who, article_id, reason=body.reason)
    return SafeJSONResponse({"id": article_id, "erased": erased})


@router.post(
    "/context", summary="Merged recall of memory scopes and knowledge", response_model=ContextOut
)
def recall_context(body: ContextBody, merged: Merged, who: Who) -> SafeJSONResponse:
    result = merged.recall_context(
        who,
        body.query,
        scopes=body.scopes,
        include_knowledge=body.include_knowledge,
        budget_tokens=body.budget_tokens,
        session_id=body.session_id,
        k=body.k,
        project=body.project,
        diversity=body.diversity,
    )
    return SafeJSONResponse(result.to_dict())


@router.post(
    "/context/{recall_id}/referenced",
    summary="Report which recalled rows were used",
    response_model=ReferencedOut,
)
def recall_referenced(
    recall_id: str, body: ReferencedBody, merged: Merged, who: Who
) -> SafeJSONResponse:
    return SafeJSONResponse(merged.referenced(who, recall_id, body.ids))


class GraduateBody(Body):
    re_scope: Literal["tenant"] | None = Field(
        None, description='"tenant": a published tenant article (needs the tenant:write grant).'
    )


@router.post(
    "/memories/{memory_id}/graduate",
    summary="Graduate a memory into a knowledge article",
    response_model=GraduateOut,
    status_code=201,
    responses={200: {"description": "Already graduated, re-scoped: the existing article"}},
)
def graduate_memory(
    memory_id: str, body: GraduateBody, merged: Merged, who: Who
) -> SafeJSONResponse:
    done = Graduation(merged.knowledge).graduate(who, memory_id, re_scope=body.re_scope)
    return SafeJSONResponse(done.to_dict(), status_code=201 if done.created else 200)


@router.get(
    "/knowledge",
    summary="List the articles you may read",
    response_model=ArticlePageOut,
)
def list_articles(
    merged: Merged,
    who: Who,
    status: Annotated[str | None, Query(description="draft or published.")] = None,
    category: Annotated[str | None, Query(description="Only this category.")] = None,
    tag: Annotated[list[str] | None, Query(description="Articles hold every one.")] = None,
    project: Annotated[str | None, Query(description="Project partition.")] = None,
    cursor: Annotated[str | None, Query(description="next_cursor of the page before.")] = None,
    limit: Annotated[int | None, Query(description="Page size (1 to 200).")] = None,
) -> SafeJSONResponse:
    page = merged.knowledge.list_articles(
        who,
        status=status,
        category=category,
        tags=tag,
        project=project,
        cursor=cursor,
        limit=limit,
    )
    return SafeJSONResponse(page.to_dict())


class CandidateReviewBody(Body):
    decision: Literal["affirm", "reject"] = Field(
        description="affirm: the body becomes the article's next version; reject: it does not."
    )
    reason: str = Field(description="Why (required).")


@router.get(
    "/review/articles",
    summary="Model-written article bodies awaiting review (reviewers)",
    response_model=ArticleCandidatePageOut,
)
def article_candidates(
    merged: Merged,
    who: Who,
    status: Annotated[
        Literal["candidate", "affirmed", "rejected"],
        Query(description="candidate (awaiting review), affirmed or rejected."),
    ] = "candidate",
    cursor: Annotated[str | None, Query(description="next_cursor of the page before.")] = None,
    limit: Annotated[int | None, Query(description="Page size (1 to 200).")] = None,
) -> SafeJSONResponse:
    page = ArticleCandidates(merged.knowledge).list(who, status=status, cursor=cursor, limit=limit)
    return SafeJSONResponse(page.to_dict())


@router.post(
    "/review/articles/{candidate_id}",
    summary="Affirm or reject a model-written article body (reviewers)",
    response_model=ArticleCandidateJudgedOut,
)
def review_article_candidate(
    candidate_id: str, body: CandidateReviewBody, merged: Merged, who: Who
) -> SafeJSONResponse:
    judged = ArticleCandidates(merged.knowledge).review(
        who, candidate_id, body.decision, reason=body.reason
    )
    return SafeJSONResponse(judged.to_dict())
