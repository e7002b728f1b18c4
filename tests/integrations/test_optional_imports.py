"""The framework adapters are optional extras (issue 27): importing Quipu, its clients or the
integrations package never imports LangGraph, LangChain or the Agents SDK; only the adapter
module itself does (and only its own framework)."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("langgraph", "langchain_core", "agents", "openai")


def _loaded(*statements: str) -> list[set[str]]:
    """The frameworks in ``sys.modules`` after each statement, run in order in one process."""
    lines = ["import sys", f"wanted = set({FRAMEWORKS!r})"]
    for statement in statements:
        lines += [
            statement,
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & wanted)))",
        ]
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [set(line.split()) for line in out.stdout.splitlines()]


def test_api_001_importing_quipu_loads_no_framework() -> None:
    bare, langgraph = _loaded(
        "import quipu, quipu.integrations, quipu.async_client",
        "import quipu.integrations.langgraph",
    )
    assert bare == set()
    assert "langgraph" in langgraph and "agents" not in langgraph


def test_api_001_the_agents_adapter_loads_only_its_framework() -> None:
    (agents,) = _loaded("import quipu.integrations.openai_agents")
    assert "agents" in agents and "langgraph" not in agents
