"""Recall across scopes (issue 27, SCOPE-4) and the knowledge plane (issue 25: KNOW-1, KNOW-2,
RECALL-9, GRAD-1) through every Python client: ``quipu.Client`` and ``quipu.AsyncClient``
against the real app on a real socket with real keys, and the embedded ``quipu.Quipu``, one
scenario for all three. Results come back as the embedded client's types (a knowledge search
as :class:`~quipu.wire_knowledge.ArticleHits`, the server sending snippets); refusals as the
same typed errors and codes."""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest

import quipu
from quipu import AsyncClient, Client
from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.core.knowledge import ArticlePage, ArticleSummary, ArticleVersion, ArticleWrite, Verdict
from quipu.core.query import RecallResult
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.recall_context import ContextResult
from quipu.surfaces.http.server import build_server
from quipu.usage import Graduated
from tests.support.live_server import LiveServer

FACTS = {
    "agent": "Deploys go out on Tuesdays after the standup",
    "user": "Dana prefers aisle seats on long flights",
}


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[tuple[str, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("knowledge-clients")
    config = load_settings({"database": str(folder / "srv.db"), "auth": True}, environ={})
    app, runtime = build_server(config, local_embedder)
    access: Access = app.state.access
    access.create_tenant("t")
    keys = {
        "admin": access.create_key("t", "admin", agent_id="ops", user_id="u-ops")[1],
        "writer": access.create_key("t", "agent", agent_id="a1", user_id="dana")[1],
    }
    server = LiveServer(app)
    yield server.url, keys
    server.close()
    runtime.close()


class Awaited:
    """An :class:`AsyncClient` whose awaited methods a synchronous test calls, each on the
    event loop of one anyio blocking portal (a real loop in a real thread)."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Any) -> None:
        self._portal, self._client = portal, client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        assert inspect.iscoroutinefunction(method), name

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._portal.call(functools.partial(method, *args, **kwargs))

        return call


def _scenario(writer: Any, admin: Any, *, writer_is_admin: bool = False) -> None:
    tag = uuid.uuid4().hex[:8]
    for scope, text in FACTS.items():
        writer.remember(f"{text} ({tag})", scope=scope)

    # -- recall across scopes (SCOPE-4) --------------------------------------------------------
    found = writer.recall_across(f"deploys and flights {tag}", ["agent", "user"], k=10)
    assert isinstance(found, RecallResult)
    assert set(found.meta["scopes"]) == {"agent", "user"}
    assert {h.memory.scope.value for h in found.results} == {"agent", "user"}
    assert [h.rank for h in found.results] == list(range(1, len(found.results) + 1))
    scores = [h.score for h in found.results]
    assert scores == sorted(scores, reverse=True)
    assert len(writer.recall_across(tag, ["agent", "user"], k=1).results) == 1
    with pytest.raises(InvalidInput) as twice:
        writer.recall_across(tag, ["agent", "agent"])
    assert twice.value.code == "invalid_scopes"

    # -- articles through the novelty gate (KNOW-1, KNOW-2) ------------------------------------
    title = f"Release calendar {tag}"
    body = f"Releases ship on Tuesdays after the standup; hotfixes any day ({tag})."
    made = admin.knowledge_create(title, body, category="ops", tags=["release"])
    assert isinstance(made, ArticleWrite) and made.verdict is Verdict.CREATED
    article = made.article
    assert (article.title, article.version, article.tags) == (title, 1, ("release",))
    again = admin.knowledge_create(title, body, category="ops", tags=["release"])
    assert again.verdict is Verdict.DEDUPLICATED and again.article.id == article.id
    hits = writer.knowledge_search(f"when do releases ship {tag}", k=5)
    row = hits.results[0].to_dict()  # the one row shape of every client
    assert row["id"] == article.id and row["title"] == title
    assert set(row) == {"id", "title", "category", "tags", "score", "snippet"}
    assert writer.knowledge_get(article.id).body == body
    changed = admin.knowledge_update(
        article.id, expected_version=1, body=body + " Freeze in December.", reason="freeze"
    )
    assert changed.verdict is Verdict.UPDATED and changed.article.version == 2
    versions = writer.knowledge_history(article.id)
    assert [v.version for v in versions] == [1, 2]
    assert all(isinstance(v, ArticleVersion) for v in versions)
    with pytest.raises(NotFound):
        writer.knowledge_get("no-such-article")

    # -- the listing, page by page (KNOW-1) ----------------------------------------------------
    listed: list[str] = []
    cursor = None
    for _ in range(50):
        page = writer.knowledge_list(category="ops", tags=["release"], cursor=cursor, limit=1)
        assert isinstance(page, ArticlePage) and len(page.items) <= 1
        listed += [a.id for a in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert article.id in listed and len(listed) == len(set(listed))
    row = next(a for a in writer.knowledge_list(tags=["release"]).items if a.id == article.id)
    assert isinstance(row, ArticleSummary) and (row.title, row.version) == (title, 2)
    assert "body" not in row.to_dict()
    with pytest.raises(InvalidInput) as bad_cursor:
        writer.knowledge_list(cursor="../x")
    assert bad_cursor.value.code == "invalid_cursor"

    # -- merged recall and its ledger (RECALL-9) -----------------------------------------------
    context = writer.recall_context(
        f"release days and seats {tag}", scopes=["agent", "user"], budget_tokens=500
    )
    assert isinstance(context, ContextResult) and context.text
    labelled = {(r["source"], r["scope"]) for r in context.results}
    assert {("memory", "agent"), ("memory", "user"), ("knowledge", "knowledge")} <= labelled
    surfaced = [context.results[0]["id"]]
    used = writer.recall_referenced(context.recall_id, surfaced)
    assert isinstance(used, dict)
    with pytest.raises(InvalidInput) as stranger:
        writer.recall_referenced(context.recall_id, [uuid.uuid4().hex])
    assert stranger.value.code == "not_surfaced"

    # -- graduation (GRAD-1) and erase ---------------------------------------------------------
    memory = writer.remember(f"The on-call rota flips every Monday at 9 ({tag})")
    graduated = writer.graduate(memory.id)
    assert isinstance(graduated, Graduated) and graduated.created
    assert graduated.memory_id == memory.id and graduated.article["visibility"] == "owner"
    if not writer_is_admin:
        with pytest.raises(Forbidden):
            writer.knowledge_erase(article.id, reason="not mine to erase")
    assert admin.knowledge_erase(article.id, reason="superseded by the wiki") is True
    with pytest.raises(NotFound):
        writer.knowledge_get(article.id)


def test_scope_004_api_001_http_client_recalls_across_scopes_and_knowledge(
    served: tuple[str, dict[str, str]],
) -> None:
    url, keys = served
    with Client(url, keys["writer"]) as writer, Client(url, keys["admin"]) as admin:
        _scenario(writer, admin)


def test_scope_004_api_001_async_client_recalls_across_scopes_and_knowledge(
    served: tuple[str, dict[str, str]],
) -> None:
    url, keys = served
    with anyio.from_thread.start_blocking_portal() as portal:
        writer = portal.call(functools.partial(AsyncClient, url, keys["writer"]))
        admin = portal.call(functools.partial(AsyncClient, url, keys["admin"]))
        try:
            _scenario(Awaited(portal, writer), Awaited(portal, admin))
        finally:
            portal.call(writer.aclose)
            portal.call(admin.aclose)


def test_scope_004_embedded_client_recalls_across_scopes_and_knowledge(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """The embedded client's principal is the trusted local admin: it plays both parts."""
    with quipu.open(tmp_path / "e.db", embedder=local_embedder, worker_embedded=False) as q:
        _scenario(q, q, writer_is_admin=True)
