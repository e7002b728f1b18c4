"""The knowledge plane and merged recall of the HTTP API (issue 25: KNOW-1, KNOW-2, RECALL-9,
GRAD-1) and recall across several scopes (issue 27, SCOPE-4) as :class:`~quipu.wire.Call`
values, and their answers turned back into the types the embedded client returns. Both HTTP
clients send these (:mod:`quipu.remote_knowledge`), so each operation is spelled once.

A search row of ``POST /v1/knowledge/search`` is ``{id, title, category, tags, score,
snippet}``, never the article's body (KNOW-1), so it decodes to :class:`ArticleHit`, not to
the embedded client's hit (which holds the whole article); ``to_dict`` of both is the same.
Articles carry no ``tenant_id`` over HTTP (the empty string here, as for memories).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from quipu.core import validate
from quipu.core.knowledge import (
    ArticlePage,
    ArticleStatus,
    ArticleSummary,
    ArticleVersion,
    ArticleWrite,
    Verdict,
    Visibility,
)
from quipu.core.query import RecallResult
from quipu.recall_context import ContextResult
from quipu.usage import Graduated
from quipu.wire import Call, memory_path, recall_from_dict

KNOWLEDGE_PATH = "/v1/knowledge"


@dataclass(frozen=True)
class ArticleHit:
    """One row of a knowledge search as the server sends it: a bounded snippet, no body."""

    id: str
    title: str
    category: str | None
    tags: tuple[str, ...]
    score: float
    snippet: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            "tags": list(self.tags),
            "score": self.score,
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class ArticleHits:
    """A knowledge search's rows, best first, and its ``meta``."""

    results: list[ArticleHit]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"results": [h.to_dict() for h in self.results], "meta": self.meta}


def article_path(article_id: str) -> str:
    return f"{KNOWLEDGE_PATH}/" + quote(validate.identifier(article_id, field="id"), safe="")


def context_path(recall_id: str) -> str:
    ident = validate.identifier(recall_id, field="recall_id")
    return "/v1/context/" + quote(ident, safe="") + "/referenced"


# -- requests ----------------------------------------------------------------------------------
def recall_across(body: dict[str, Any]) -> Call[RecallResult]:
    """``POST /v1/recall`` with ``scopes``: one read per scope, merged (verbose hits, decoded
    whole like :func:`quipu.wire.recall`)."""
    return Call("POST", "/v1/recall", recall_from_dict, json={**body, "verbose": True})


def create_article(body: dict[str, Any]) -> Call[ArticleWrite]:
    return Call("POST", KNOWLEDGE_PATH, article_write_from_dict, json=body)


def update_article(article_id: str, body: dict[str, Any]) -> Call[ArticleWrite]:
    return Call("PATCH", article_path(article_id), article_write_from_dict, json=body)


def get_article(article_id: str, params: dict[str, Any]) -> Call[ArticleVersion]:
    return Call("GET", article_path(article_id), article_from_dict, params=params)


def article_history(article_id: str) -> Call[list[ArticleVersion]]:
    def decode(data: Any) -> list[ArticleVersion]:
        return [article_from_dict(item) for item in data["items"]]

    return Call("GET", article_path(article_id) + "/history", decode)


def erase_article(article_id: str, body: dict[str, Any]) -> Call[bool]:
    return Call(
        "POST", article_path(article_id) + "/erase", lambda data: bool(data["erased"]), json=body
    )


def search_articles(body: dict[str, Any]) -> Call[ArticleHits]:
    return Call("POST", f"{KNOWLEDGE_PATH}/search", article_hits_from_dict, json=body)


def recall_context(body: dict[str, Any]) -> Call[ContextResult]:
    return Call("POST", "/v1/context", context_from_dict, json=body)


def referenced(recall_id: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", context_path(recall_id), dict, json=body)


def graduate(memory_id: str, body: dict[str, Any]) -> Call[Graduated]:
    return Call("POST", memory_path(memory_id) + "/graduate", graduated_from_dict, json=body)


# -- answers -> domain types -------------------------------------------------------------------
def article_from_dict(data: Mapping[str, Any]) -> ArticleVersion:
    """An :class:`ArticleVersion` from ``ArticleVersion.to_dict()`` as the server sends it."""
    return ArticleVersion(
        id=str(data["id"]),
        version=int(data["version"]),
        tenant_id="",
        owner=str(data["owner"]),
        title=str(data["title"]),
        body=str(data["body"]),
        category=data.get("category"),
        tags=tuple(str(t) for t in data.get("tags") or ()),
        project=data.get("project"),
        visibility=Visibility(data["visibility"]),
        status=ArticleStatus(data["status"]),
        source=str(data["source"]),
        related_id=data.get("related_id"),
        memory_id=data.get("memory_id"),
        content_hash=str(data["content_hash"]),
        recorded_at=datetime.fromisoformat(str(data["recorded_at"])),
        actor=str(data["actor"]),
        relation=str(data["relation"]),
        reason=data.get("reason"),
        is_current=bool(data.get("is_current", True)),
    )


def article_write_from_dict(data: Mapping[str, Any]) -> ArticleWrite:
    similarity = data.get("similarity")
    return ArticleWrite(
        Verdict(data["verdict"]),
        article_from_dict(data["article"]),
        similar_to=data.get("similar_to"),
        similarity=None if similarity is None else float(similarity),
    )


def article_hits_from_dict(data: Mapping[str, Any]) -> ArticleHits:
    rows = [
        ArticleHit(
            id=str(row["id"]),
            title=str(row["title"]),
            category=row.get("category"),
            tags=tuple(str(t) for t in row.get("tags") or ()),
            score=float(row["score"]),
            snippet=str(row["snippet"]),
        )
        for row in data["results"]
    ]
    return ArticleHits(rows, dict(data.get("meta") or {}))


def context_from_dict(data: Mapping[str, Any]) -> ContextResult:
    return ContextResult(
        [dict(row) for row in data["results"]], str(data["text"]), dict(data["meta"])
    )


def list_articles(params: dict[str, Any]) -> Call[ArticlePage]:
    """``GET /v1/knowledge``: a page of the articles the caller may read (``tags`` is sent as
    repeated ``tag`` parameters)."""
    query = dict(params)
    if "tags" in query:
        query["tag"] = list(query.pop("tags"))
    return Call("GET", KNOWLEDGE_PATH, article_page_from_dict, params=query)


def article_page_from_dict(data: Mapping[str, Any]) -> ArticlePage:
    items = [
        ArticleSummary(
            id=str(row["id"]),
            version=int(row["version"]),
            title=str(row["title"]),
            category=row.get("category"),
            tags=tuple(str(t) for t in row.get("tags") or ()),
            project=row.get("project"),
            visibility=Visibility(row["visibility"]),
            status=ArticleStatus(row["status"]),
            owner=str(row["owner"]),
            source=str(row["source"]),
            related_id=row.get("related_id"),
            recorded_at=datetime.fromisoformat(str(row["recorded_at"])),
        )
        for row in data["items"]
    ]
    cursor = data.get("next_cursor")
    return ArticlePage(items, None if cursor is None else str(cursor))


def graduated_from_dict(data: Mapping[str, Any]) -> Graduated:
    candidate = data.get("candidate_id")
    return Graduated(
        Verdict(data["verdict"]),
        dict(data["article"]),
        str(data["memory_id"]),
        None if candidate is None else str(candidate),
    )


# -- review of model-written article bodies (GRAD-1, LIFE-5) --------------------------------------
CANDIDATES_PATH = "/v1/review/articles"


def article_candidates(params: dict[str, Any]) -> Call[dict[str, Any]]:
    """``GET /v1/review/articles``: a page of model-written bodies (reviewers)."""
    return Call("GET", CANDIDATES_PATH, dict, params=params)


def review_article(candidate_id: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    """``POST /v1/review/articles/{candidate_id}``: affirm or reject one."""
    ident = validate.identifier(candidate_id, field="id")
    return Call("POST", f"{CANDIDATES_PATH}/" + quote(ident, safe=""), dict, json=body)
