"""The embedded client's plane verbs, as mixins of :class:`quipu.embedded.Quipu` so each plane
keeps its own room: knowledge, merged recall and graduation (issue 25), the compiled memory
index and harvest (issue 24), the entity graph (issue 26)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from quipu.article_candidates import ArticleCandidates
from quipu.consolidation.index import IndexService, IndexView
from quipu.core.knowledge import ArticlePage, ArticleVersion, ArticleWrite
from quipu.core.records import Principal
from quipu.graph.merges import GraphMerges
from quipu.graph.placement import Placement
from quipu.graph.service import Graph
from quipu.harvest import Harvester, Receipt
from quipu.knowledge import KnowledgeResult, KnowledgeService
from quipu.memories import MemoryService
from quipu.recall_context import ContextResult, MergedRecall
from quipu.runtime import Runtime
from quipu.usage import Graduated, Graduation
from quipu.wire import Instant


class KnowledgeVerbs:
    """Knowledge articles, merged recall (recall_context) and graduation over the runtime."""

    runtime: Runtime
    principal: Principal

    # -- knowledge, merged recall and graduation (KNOW-1/2, RECALL-9, GRAD-1) ----------------
    @property
    def merged(self) -> MergedRecall:
        """The knowledge plane and merged recall over this client's store (made on first use)."""
        found: MergedRecall | None = self.__dict__.get("_merged")
        if found is None:
            found = self.__dict__["_merged"] = MergedRecall(KnowledgeService(self.runtime.service))
        return found

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
        """Write an article through the novelty gate (KNOW-2)."""
        return self.merged.knowledge.create(
            self.principal,
            title,
            body,
            category=category,
            tags=tags,
            project=project,
            visibility=visibility,
            status=status,
        )

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
        return self.merged.knowledge.update(
            self.principal,
            article_id,
            expected_version=expected_version,
            title=title,
            body=body,
            category=category,
            tags=tags,
            visibility=visibility,
            status=status,
            reason=reason,
        )

    def knowledge_get(self, article_id: str, *, as_of: Instant | None = None) -> ArticleVersion:
        return self.merged.knowledge.get(self.principal, article_id, as_of=as_of)

    def knowledge_search(
        self,
        query: str,
        *,
        k: int | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        project: str | None = None,
    ) -> KnowledgeResult:
        """Rows ``{id, title, category, tags, score, snippet}``."""
        return self.merged.knowledge.search(
            self.principal, query, k=k, category=category, tags=tags, project=project
        )

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
        return self.merged.recall_context(
            self.principal,
            query,
            scopes=list(scopes),
            include_knowledge=include_knowledge,
            budget_tokens=budget_tokens,
            session_id=session_id,
            k=k,
            project=project,
            diversity=None if diversity is None else dict(diversity),
        )

    def recall_referenced(self, recall_id: str, ids: Sequence[str]) -> dict[str, Any]:
        return self.merged.referenced(self.principal, recall_id, list(ids))

    def graduate(self, memory_id: str, *, re_scope: str | None = None) -> Graduated:
        """Graduate one of this principal's memories into a knowledge article (GRAD-1)."""
        return Graduation(self.merged.knowledge).graduate(
            self.principal, memory_id, re_scope=re_scope
        )

    def knowledge_history(self, article_id: str) -> builtins.list[ArticleVersion]:
        """Every version of an article, oldest first."""
        return self.merged.knowledge.history(self.principal, article_id)

    def knowledge_erase(self, article_id: str, *, reason: str) -> bool:
        return self.merged.knowledge.erase(self.principal, article_id, reason=reason)

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
        """The articles this principal may read, by id, a page at a time (KNOW-1): summaries,
        no bodies; pass ``next_cursor`` back as ``cursor`` for the next page."""
        return self.merged.knowledge.list_articles(
            self.principal,
            status=status,
            category=category,
            tags=tags,
            project=project,
            cursor=cursor,
            limit=limit,
        )

    def article_candidates(
        self, *, status: str = "candidate", cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """Reviewers: article bodies a model wrote for graduated memories (GRAD-1), by id."""
        found = ArticleCandidates(self.merged.knowledge).list(
            self.principal, status=status, cursor=cursor, limit=limit
        )
        return found.to_dict()

    def review_article(self, candidate_id: str, decision: str, *, reason: str) -> dict[str, Any]:
        """Reviewers: ``affirm`` (the article's next version) or ``reject`` a model's body;
        never one written for this principal's own memory (403 ``self_review``)."""
        judged = ArticleCandidates(self.merged.knowledge).review(
            self.principal, candidate_id, decision, reason=reason
        )
        return judged.to_dict()


class IndexGraphVerbs:
    """Index, harvest and graph verbs over the client's runtime, principal and graph."""

    runtime: Runtime
    service: MemoryService
    principal: Principal
    graph: Graph

    # -- the compiled memory index and harvest (issue 24) ------------------------------------
    def index_get(self, *, scope: str = "agent") -> IndexView:
        """The scope's compiled memory index, framed as data (CONSOL-1, API-3); an empty one
        flagged ``degraded`` when the store cannot be read, never an error."""
        return self._index.get(self.principal, scope=scope)

    def index_history(
        self, *, scope: str = "agent", before: int | None = None, limit: int | None = None
    ) -> builtins.list[dict[str, Any]]:
        return self._index.history(self.principal, scope=scope, before=before, limit=limit)

    def index_diff(
        self,
        from_version: int | None = None,
        to_version: int | None = None,
        *,
        scope: str = "agent",
    ) -> dict[str, Any]:
        return self._index.diff(self.principal, from_version, to_version, scope=scope)

    def index_rebuild(self, *, scope: str = "agent") -> dict[str, Any]:
        """Compile the scope's index now (the worker's sweep does it after writes)."""
        return self._index.rebuild(self.principal, scope=scope).to_dict()

    def harvest(
        self,
        spans: Sequence[str | dict[str, str]],
        *,
        boundary: str = "compaction",
        scope: str = "agent",
        session_id: str | None = None,
    ) -> Receipt:
        """Hand over spans about to leave the context window (HARVEST-1); answers at once,
        extraction runs on a background thread over the whole batch."""
        if self.runtime.harvest is None:  # a runtime built without one: the bundled rules
            from quipu.extraction.deterministic import DeterministicExtractor

            self.runtime.harvest = Harvester(self.service, DeterministicExtractor())
        return self.runtime.harvest.harvest(
            self.principal, list(spans), boundary=boundary, scope=scope, session_id=session_id
        )

    @property
    def _index(self) -> IndexService:
        found = self.runtime.index
        if found is None:
            found = self.runtime.index = IndexService(self.service)
        return found

    # -- entity graph (GRAPH-1): the answers of quipu.Client's graph methods ----------------
    def graph_recall(
        self,
        query: str,
        *,
        scope: str = "agent",
        hops: int = 1,
        limit: int | None = None,
        as_of: Instant | None = None,
    ) -> dict[str, Any]:
        """The entities ``query`` names in one scope and the facts within ``hops`` (0-2)."""
        return self.graph.recall(query, scope=scope, hops=hops, limit=limit, as_of=as_of).to_dict()

    def graph_facts(
        self,
        subject: str,
        *,
        scope: str = "agent",
        as_of: Instant | None = None,
        include_invalidated: bool = False,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """What is known about ``subject`` (a name, alias or entity id) in one scope."""
        return self.graph.facts(
            subject,
            scope=scope,
            as_of=as_of,
            include_invalidated=include_invalidated,
            limit=limit,
        ).to_dict()

    def graph_ontology(
        self, *, types: Sequence[str] | None = None, predicates: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """The tenant's entity types and single-valued predicates (``types``/``predicates``
        add some first)."""
        return self.graph.declare(types=types, predicates=predicates)

    def graph_placement(
        self,
        *,
        types: Sequence[Mapping[str, Any]] | None = None,
        isolated: Sequence[str] | None = None,
        expected_version: int | None = None,
        reason: str | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """The tenant's placement policy (GRAPH-2), or ``version`` of it; with ``types`` or
        ``isolated``, declare a new version first (admin keys)."""
        own = self.service.placement
        placing = own if isinstance(own, Placement) else Placement(self.graph.service)
        if types is None and isolated is None:
            return placing.policy(self.principal, version)
        return placing.declare(
            self.principal,
            types=None if types is None else [dict(t) for t in types],
            isolated=None if isolated is None else list(isolated),
            expected_version=expected_version,
            reason=reason,
        )

    # -- entity merges (GRAPH-1): versioned and reversible, as quipu.Client answers them ------
    def graph_merge(
        self, keep: str, merge: str, *, scope: str = "agent", reason: str | None = None
    ) -> dict[str, Any]:
        """Merge entity ``merge`` into entity ``keep`` (entity ids of one scope): a new version
        of ``keep``; reversible with :meth:`graph_merge_revert`."""
        return GraphMerges(self.graph.service).merge(
            self.principal, keep, merge, scope=scope, reason=reason
        )

    def graph_merge_revert(
        self, merge_id: str, *, scope: str = "agent", reason: str | None = None
    ) -> dict[str, Any]:
        """Undo an entity merge: the merged entity returns with its facts and mentions."""
        return GraphMerges(self.graph.service).revert(
            self.principal, merge_id, scope=scope, reason=reason
        )

    def graph_entity_history(self, entity_id: str, *, scope: str = "agent") -> dict[str, Any]:
        """An entity's old versions, oldest first (what each merge or revert replaced)."""
        return GraphMerges(self.graph.service).history(self.principal, entity_id, scope=scope)
