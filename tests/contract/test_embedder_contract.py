"""Embedder degradation, pinning and caching (RECALL-4), with a real local HTTP endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from quipu.core.limits import Limits
from quipu.core.records import Principal
from quipu.embeddings.openai_compat import OpenAICompatEmbedder
from quipu.errors import Conflict
from quipu.memories import MemoryService
from quipu.storage.sqlite.store import SQLiteStore
from tests.support.embedding_server import EmbeddingServer
from tests.support.projects import register


def test_recall_004_embedder_down_falls_back_to_full_text(
    make_store, remote_embedder, embedding_server: EmbeddingServer, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(make_store(), remote_embedder, Limits())
    svc.remember(alice, "the staging database lives on host db-stage-2")
    svc.remember(alice, "lunch is at noon on Fridays")
    healthy = svc.recall(alice, "staging database host")
    assert healthy.meta["fallback"] is False
    embedding_server.down = True
    degraded = svc.recall(alice, "staging database host")
    assert degraded.meta["fallback"] is True and degraded.meta["reason"] == "embedder_unavailable"
    assert [h.memory.text for h in degraded.results][:1] == [
        "the staging database lives on host db-stage-2"
    ]
    assert degraded.results[0].matched == ("text",)
    # an empty scope while degraded is still an honest empty page, flagged
    empty = svc.recall(alice, "staging", scope="user")
    assert empty.results == [] and empty.meta["fallback"] is True


def test_recall_004_write_while_embedder_down_is_kept_and_embedded_later(
    make_store, remote_embedder, embedding_server: EmbeddingServer, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(make_store(), remote_embedder, Limits())
    embedding_server.down = True
    m = svc.remember(alice, "written during an outage").memory
    assert m.embedding_model is None
    assert [h.memory.id for h in svc.recall(alice, "outage").results] == [m.id]
    embedding_server.down = False
    assert svc.embed_pending() == 1
    hit = svc.recall(alice, "written during an outage").results[0]
    assert "semantic" in hit.matched


def test_recall_004_restart_never_re_embeds(
    tmp_path: Path, remote_embedder, embedding_server: EmbeddingServer, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "r.db"
    svc = MemoryService(SQLiteStore(path), remote_embedder, Limits())
    for i in range(20):
        svc.remember(alice, f"fact number {i} about the roadmap")
    svc.store.close()
    embedded_before = len(embedding_server.texts)
    svc = MemoryService(SQLiteStore(path), remote_embedder, Limits())
    result = svc.recall(alice, "roadmap fact", k=20)
    assert len(result.results) == 20
    assert len(embedding_server.texts) == embedded_before + 1  # only the query
    # the same text in the same tenant is never embedded twice
    register(svc.store, "t1", "other")
    m = svc.remember(alice, "fact number 3 about the roadmap", project="other").memory
    assert m.embedding_model is not None
    assert len(embedding_server.texts) == embedded_before + 1
    svc.store.close()


def test_recall_004_opening_with_another_model_is_a_clear_error(
    tmp_path: Path, local_embedder, remote_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pinned.db"
    svc = MemoryService(SQLiteStore(path), local_embedder, Limits())
    svc.remember(alice, "pinned to the local model")
    svc.store.close()
    store = SQLiteStore(path)
    with pytest.raises(Conflict) as err:
        MemoryService(store, remote_embedder, Limits())
    assert err.value.code == "embedding_model_mismatch"
    assert "all-MiniLM-L6-v2" in err.value.message
    store.close()


def test_recall_004_no_embedder_is_flagged_not_silent(make_store, alice: Principal) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(make_store(), None, Limits())
    svc.remember(alice, "full text only store")
    result = svc.recall(alice, "full text")
    assert result.meta["fallback"] is True and result.meta["reason"] == "embedder_disabled"
    assert [h.memory.text for h in result.results] == ["full text only store"]


def test_unused_remote_embedder_closes(remote_embedder: OpenAICompatEmbedder) -> None:
    assert remote_embedder.dimension == 64


def test_a_focused_recall_embeds_both_texts_in_one_request(
    make_store, remote_embedder, embedding_server: EmbeddingServer, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """The focused query (docs/benchmarks.md, seventh round) costs a hosted embedder no second
    round trip: the query and the query without its common words go in one request; a query
    with no common word sends only itself; a failing endpoint still falls back to full text."""
    svc = MemoryService(make_store(), remote_embedder, Limits())
    for i in range(12):
        svc.remember(alice, f"Zara: note {i} about the week")
    svc.remember(alice, "Zara: I moved to Bologna last weekend")
    calls, texts = embedding_server.calls, len(embedding_server.texts)
    hits = svc.recall(alice, "Where is Zara based?")
    assert embedding_server.calls == calls + 1
    assert embedding_server.texts[texts:] == ["Where is Zara based?", "Where is based"]
    assert hits.meta["fallback"] is False and "focus_ms" in hits.meta["timings"]
    svc.recall(alice, "Bologna weekend")
    assert embedding_server.calls == calls + 2
    assert embedding_server.texts[texts + 2 :] == ["Bologna weekend"]
    embedding_server.down = True
    degraded = svc.recall(alice, "Where did Zara move to?")
    assert degraded.meta["reason"] == "embedder_unavailable"
    assert degraded.results[0].memory.text == "Zara: I moved to Bologna last weekend"
