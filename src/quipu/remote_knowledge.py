"""Recall across scopes and the knowledge plane on :class:`quipu.Client` and
:class:`quipu.AsyncClient` (issue 27 SCOPE-4; issue 25 KNOW-1, KNOW-2, RECALL-9, GRAD-1): every
knowledge route of the HTTP API, with the names and results of the embedded
:class:`quipu.Quipu` (a knowledge search answers :class:`~quipu.wire_knowledge.ArticleHits`:
the server sends snippets, not bodies).

Each method sends the request :mod:`quipu.wire_knowledge` spells; the two mixins differ only in
awaiting it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from quipu import wire
from quipu import wire_knowledge as wk
from quipu.core.knowledge import ArticlePage, ArticleVersion, ArticleWrite
from quipu.core.query import RecallResult
from quipu.recall_context import ContextResult
from quipu.usage import Graduated
from quipu.wire import Call, Instant
from quipu.wire_knowledge import ArticleHits

T = TypeVar("T")


def _article_body(values: Mapping[str, Any]) -> dict[str, Any]:
    body = wire.given(values, leave_out=["article_id"])
    if "tags" in body:
        body["tags"] = list(body["tags"])
    return body


def _context_body(values: Mapping[str, Any]) -> dict[str, Any]:
    body = wire.given(values)
    body["scopes"] = list(body["scopes"])
    return body


class KnowledgeCalls:
    """Recall across scopes, articles, merged recall and graduation on :class:`quipu.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def recall_across(
        self,
        query: str,
        scopes: Sequence[str],
        *,
        k: int | None = None,
        planes: Sequence[str] | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> RecallResult:
        """One recall per scope of ``scopes`` (each its own read), merged best first and cut
        to ``k``; every hit keeps its memory's scope, ``meta.scopes`` each scope's meta
        (SCOPE-4). A scope the key cannot read refuses the whole call."""
        return self._send(wk.recall_across(wire.given(locals())))

    def knowledge_create(
        self,
        title: str,
        body: str,
        *,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
        visibility: str = "tenant",
        status: str = "published",
    ) -> ArticleWrite:
        """Write an article through the novelty gate (KNOW-2): ``verdict`` says whether it was
        ``created``, ``gated_to_draft`` (a near duplicate) or ``deduplicated``."""
        return self._send(wk.create_article(_article_body(locals())))

    def knowledge_update(
        self,
        article_id: str,
        *,
        expected_version: int,
        title: str | None = None,
        body: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        visibility: str | None = None,
        status: str | None = None,
        reason: str | None = None,
    ) -> ArticleWrite:
        return self._send(wk.update_article(article_id, _article_body(locals())))

    def knowledge_get(self, article_id: str, *, as_of: Instant | None = None) -> ArticleVersion:
        return self._send(wk.get_article(article_id, wire.given({"as_of": as_of})))

    def knowledge_history(self, article_id: str) -> list[ArticleVersion]:
        """Every version of an article, oldest first."""
        return self._send(wk.article_history(article_id))

    def knowledge_erase(self, article_id: str, *, reason: str) -> bool:
        return self._send(wk.erase_article(article_id, {"reason": reason}))

    def knowledge_search(
        self,
        query: str,
        *,
        k: int | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
    ) -> ArticleHits:
        """Rows ``{id, title, category, tags, score, snippet}``."""
        return self._send(wk.search_articles(_article_body(locals())))

    def recall_context(
        self,
        query: str,
        *,
        scopes: Sequence[str] = ("agent",),
        include_knowledge: bool = True,
        budget_tokens: int = 2000,
        session_id: str | None = None,
        k: int | None = None,
        project: str | None = None,
        diversity: Mapping[str, Any] | None = None,
    ) -> ContextResult:
        """Memory of several scopes and knowledge in one ranked, budgeted list (RECALL-9)."""
        return self._send(wk.recall_context(_context_body(locals())))

    def recall_referenced(self, recall_id: str, ids: Sequence[str]) -> dict[str, Any]:
        """Report which rows of recall ``recall_id`` were used (only rows it surfaced)."""
        return self._send(wk.referenced(recall_id, {"ids": list(ids)}))

    def graduate(self, memory_id: str, *, re_scope: str | None = None) -> Graduated:
        """Graduate a memory into a knowledge article (GRAD-1)."""
        return self._send(wk.graduate(memory_id, wire.given({"re_scope": re_scope})))

    def knowledge_list(
        self,
        *,
        status: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> ArticlePage:
        """The articles you may read, by id, a page at a time (summaries, no bodies)."""
        return self._send(wk.list_articles(wire.given(locals())))

    def article_candidates(
        self, *, status: str = "candidate", cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """Reviewers: article bodies a model wrote for graduated memories (GRAD-1), a page."""
        return self._send(wk.article_candidates(wire.given(locals())))

    def review_article(self, candidate_id: str, decision: str, *, reason: str) -> dict[str, Any]:
        """Reviewers: ``affirm`` (the article's next version) or ``reject`` a model's body."""
        return self._send(wk.review_article(candidate_id, {"decision": decision, "reason": reason}))


class AsyncKnowledgeCalls:
    """The methods of :class:`KnowledgeCalls` on :class:`quipu.AsyncClient`, awaited."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def recall_across(
        self,
        query: str,
        scopes: Sequence[str],
        *,
        k: int | None = None,
        planes: Sequence[str] | None = None,
        as_of: Instant | None = None,
        observed_after: Instant | None = None,
        observed_before: Instant | None = None,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        min_confidence: float | None = None,
        project: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> RecallResult:
        return await self._send(wk.recall_across(wire.given(locals())))

    async def knowledge_create(
        self,
        title: str,
        body: str,
        *,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
        visibility: str = "tenant",
        status: str = "published",
    ) -> ArticleWrite:
        return await self._send(wk.create_article(_article_body(locals())))

    async def knowledge_update(
        self,
        article_id: str,
        *,
        expected_version: int,
        title: str | None = None,
        body: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        visibility: str | None = None,
        status: str | None = None,
        reason: str | None = None,
    ) -> ArticleWrite:
        return await self._send(wk.update_article(article_id, _article_body(locals())))

    async def knowledge_get(
        self, article_id: str, *, as_of: Instant | None = None
    ) -> ArticleVersion:
        return await self._send(wk.get_article(article_id, wire.given({"as_of": as_of})))

    async def knowledge_history(self, article_id: str) -> list[ArticleVersion]:
        return await self._send(wk.article_history(article_id))

    async def knowledge_erase(self, article_id: str, *, reason: str) -> bool:
        return await self._send(wk.erase_article(article_id, {"reason": reason}))

    async def knowledge_search(
        self,
        query: str,
        *,
        k: int | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
    ) -> ArticleHits:
        return await self._send(wk.search_articles(_article_body(locals())))

    async def recall_context(
        self,
        query: str,
        *,
        scopes: Sequence[str] = ("agent",),
        include_knowledge: bool = True,
        budget_tokens: int = 2000,
        session_id: str | None = None,
        k: int | None = None,
        project: str | None = None,
        diversity: Mapping[str, Any] | None = None,
    ) -> ContextResult:
        return await self._send(wk.recall_context(_context_body(locals())))

    async def recall_referenced(self, recall_id: str, ids: Sequence[str]) -> dict[str, Any]:
        return await self._send(wk.referenced(recall_id, {"ids": list(ids)}))

    async def graduate(self, memory_id: str, *, re_scope: str | None = None) -> Graduated:
        return await self._send(wk.graduate(memory_id, wire.given({"re_scope": re_scope})))

    async def knowledge_list(
        self,
        *,
        status: str | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> ArticlePage:
        return await self._send(wk.list_articles(wire.given(locals())))

    async def article_candidates(
        self, *, status: str = "candidate", cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        return await self._send(wk.article_candidates(wire.given(locals())))

    async def review_article(
        self, candidate_id: str, decision: str, *, reason: str
    ) -> dict[str, Any]:
        return await self._send(
            wk.review_article(candidate_id, {"decision": decision, "reason": reason})
        )
