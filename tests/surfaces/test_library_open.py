"""``quipu.open(path, ...)`` (API-1, API-5): every keyword is a setting, resolved in one place.

Issue 20 defect 15: ``embedder="none"`` raised AttributeError and ``extractor="model"`` gave a
client whose promotion jobs failed, because the explicit parameters shadowed the settings of
the same names. Real SQLite files, the real bundled model, and for the model extractor a small
local server speaking the chat-completions protocol (the hosted model is off this machine).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import quipu
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import ConfigurationError
from quipu.extraction.model import ModelExtractor
from tests.support.chat_server import ChatServer
from tests.support.embedding_server import DIM, EmbeddingServer


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.close()


def test_api_001_open_embedder_none_is_the_setting(tmp_path: Path) -> None:
    """Issue 20 defect 15: ``embedder="none"`` is the setting (full text only), not an object."""
    with quipu.open(tmp_path / "plain.db", embedder="none", worker_embedded=False) as mem:
        assert mem.service.embedder is None
        kept = mem.remember("Dana keeps her passport in the blue drawer")
        found = mem.recall("where is the passport?")
        assert [h.memory.id for h in found] == [kept.id]
        assert found.meta["fallback"] and found.meta["reason"] == "embedder_disabled"


def test_api_001_open_embedder_openai_is_the_setting(
    tmp_path: Path, embedding_server: EmbeddingServer
) -> None:
    """The other values of the setting work the same way: ``embedder="openai"`` with the
    endpoint settings builds the OpenAI-compatible embedder (a local server here)."""
    with quipu.open(
        tmp_path / "remote-vectors.db",
        embedder="openai",
        embedding_base_url=embedding_server.url,
        embedding_model="bag",
        embedding_dimension=DIM,
        worker_embedded=False,
    ) as mem:
        kept = mem.remember("the staging database moved to host db-7")
        assert mem.recall("where is the staging database?").results[0].memory.id == kept.id
    assert embedding_server.calls >= 2


def test_promo_001_open_extractor_model_promotes_through_the_model(
    tmp_path: Path, local_embedder: LocalEmbedder, chat_server: ChatServer
) -> None:
    """Issue 20 defect 15: ``extractor="model"`` builds the model extractor from the
    ``extractor_*`` settings, and a promotion job through it succeeds (it failed before)."""
    with quipu.open(
        tmp_path / "promoted.db",
        embedder=local_embedder,  # an instance is still used as is
        extractor="model",
        extractor_base_url=chat_server.url,
        extractor_model="tiny-chat",
        extractor_api_key="sk-test-0123456789abcdef",
        worker_embedded=False,
    ) as mem:
        session = mem.session("trip-planning")
        session.append("user", "My favourite airline is Iberia.")
        session.append("assistant", "Noted.")
        job = session.promote(wait=True)
        assert job.status.value == "succeeded", job.last_error
        assert job.result["outcome"] == "promoted" and job.result["created"] == 1
        # model output waits for a reviewer (LIFE-5): not recalled until activated
        assert not mem.recall("which airline does the user like?", scope="agent_user").results
        (candidate,) = mem.review_queue().items
        assert candidate.status.value == "candidate" and candidate.trust.value == "unverified"
        mem.review(candidate.id, "activate", reason="the user said so", reviewer="dana")
        hits = mem.recall("which airline does the user like?", scope="agent_user")
        assert hits.results and hits.results[0].memory.text == "My favourite airline is Iberia."
        assert "tiny-chat" in (hits.results[0].memory.provenance.model or "")
    ((path, headers, body),) = chat_server.requests
    assert path == "/v1/chat/completions" and body["model"] == "tiny-chat"
    assert headers["Authorization"] == "Bearer sk-test-0123456789abcdef"


def test_api_001_open_takes_a_ready_extractor(
    tmp_path: Path, local_embedder: LocalEmbedder, chat_server: ChatServer
) -> None:
    with (
        ModelExtractor(base_url=chat_server.url, model="shared-chat") as shared,
        quipu.open(
            tmp_path / "shared.db",
            embedder=local_embedder,
            extractor=shared,
            worker_embedded=False,
        ) as mem,
    ):
        mem.session("s").append("user", "The office wifi is on the third floor.")
        mem.session("s").append("assistant", "Thanks.")
        job = mem.session("s").promote(wait=True)
        assert job.status.value == "succeeded" and job.result["created"] == 1
    assert [r[2]["model"] for r in chat_server.requests] == ["shared-chat"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"embedder": 42}, "embedder must be a setting value"),
        ({"extractor": b"model"}, "extractor must be a setting value"),
        ({"embedder": "bogus"}, "embedder"),
        ({"embedder": "none\x00"}, "embedder"),
        ({"extractor": "model"}, "extractor_base_url"),
        ({"extractor": "model\ud800"}, "extractor"),
    ],
)
def test_api_005_open_refuses_bad_parts_clearly(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        quipu.open(tmp_path / "bad.db", worker_embedded=False, **options)  # type: ignore[arg-type]
    assert not (tmp_path / "bad.db").exists()


@pytest.mark.parametrize(
    "path", ["http://127.0.0.1:9", "https://quipu.example/", "http:/x", "ftp://host/x.db"]
)
def test_ops_001_open_never_turns_a_url_into_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Issue 20 defect 15: a URL that is not a database is refused, never a folder `http:`."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError):
        quipu.open(path, worker_embedded=False)
    assert list(tmp_path.iterdir()) == []
