"""docs/integrations.md runs as written (issue 27): each framework's example is executed here
against the real package, in a fresh directory, and what it did is checked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def snippets(heading: str, language: str = "python") -> list[str]:
    """The ``language`` code blocks of the section whose heading starts with ``heading``."""
    text = DOC.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    (section,) = [s for s in sections if s.startswith(heading)]
    return re.findall(rf"^```{language}\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)


def run(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


class Prompts(BaseCallbackHandler):
    """What the chat model was sent."""

    def __init__(self) -> None:
        self.seen: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self.seen.extend(messages)


def test_api_001_langgraph_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = snippets("LangGraph")
    ns = run(code, tmp_path, monkeypatch)
    mem = ns["mem"]
    try:
        assert capsys.readouterr().out.strip() == "By the window."
        stored = mem.recall("seat preference on flights", scope="user").results
        assert stored[0].memory.text == "I prefer window seats on long flights"
        assert stored[0].memory.metadata["langgraph"]["namespace"] == ["users", "u-42"]
        prompts = Prompts()
        ns["graph"].invoke(
            {"messages": [("user", "Which seat should I book?")]}, {"callbacks": [prompts]}
        )
        system = str(prompts.seen[-1][0].content)
        assert "I prefer window seats on long flights" in system  # recalled into the prompt
    finally:
        mem.close()


def test_api_001_openai_agents_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.agent_model_server import AgentModelServer

    (code,) = snippets("OpenAI Agents SDK")
    server = AgentModelServer()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # traces would go to OpenAI
    try:
        ns = run(code, tmp_path, monkeypatch)
    finally:
        server.close()
    mem = ns["mem"]
    try:
        assert capsys.readouterr().out.startswith("Done: found 1 memory:")
        assert ns["job"].status.value == "succeeded"
        assert [t.role for t in mem.session("chat-42").history()][:2] == ["user", "assistant"]
        assert len(server.requests) == 4  # two runs, each a tool call and an answer
    finally:
        mem.close()


def test_scope_002_python_clients_example_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    local_embedder: Any,
) -> None:
    from quipu.composition import load_settings
    from quipu.surfaces.http.server import build_server
    from tests.support.live_server import LiveServer

    (code,) = snippets("Python clients")
    settings = load_settings({"database": str(tmp_path / "srv.db"), "auth": True}, environ={})
    app, runtime = build_server(settings, local_embedder)
    app.state.access.create_tenant("acme")
    _, service_key = app.state.access.create_key("acme", "service")
    server = LiveServer(app)
    monkeypatch.setenv("QUIPU_URL", server.url)
    monkeypatch.setenv("QUIPU_SERVICE_KEY", service_key)
    try:
        run(code, tmp_path, monkeypatch)
        assert capsys.readouterr().out.splitlines() == ["Alice is vegetarian", "0"]
        rows = runtime.service.store.export_versions("acme")
        (alice,) = [m for m, _ in rows]
        assert alice.text == "Alice is vegetarian" and alice.owner.endswith("alice")
    finally:
        server.close()
        runtime.close()
