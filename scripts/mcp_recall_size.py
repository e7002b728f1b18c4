#!/usr/bin/env python3
"""How many characters a default `memory_recall` answer costs an agent (issue 27), as JSON.

    python scripts/mcp_recall_size.py [--conversations 3] [--queries 30]

Stores the user turns of the seeded synthetic corpus (EVAL-1) as memories of one agent in a
fresh SQLite file (bundled embedding model), then calls `memory_recall` through the MCP SDK's
own client (in process) with the default arguments (k=10) for the corpus's questions. For each
call it counts the characters of the answer and of the memory text in it (each hit's text,
once). "answer chars" are what the client is handed: the text blocks plus, when sent, the JSON
of the structured copy; the JSON-RPC result (with its escaping and envelope) is reported beside
it. Also measures `tools/list` (what a client loads into its context when it connects).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from quipu.composition import build_runtime, load_settings
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.embeddings.local import LocalEmbedder
from quipu.evals.synthetic import generate
from quipu.memories import MemoryService
from quipu.sessions import SessionService
from quipu.storage.sqlite.store import SQLiteStore
from quipu.surfaces.mcp import create_mcp_server, fixed_principal

AGENT = Principal("t1", "key-agent", Role.AGENT, agent_id="agent", user_id="user")


def _structure(result: Any) -> dict[str, Any]:
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


def _content_chars(result: Any) -> int:
    """What the client is handed: every text block, plus the structured copy when sent."""
    size = sum(len(block.text) for block in result.content)
    if result.structured_content is not None:
        size += len(json.dumps(result.structured_content, ensure_ascii=False))
    return size


async def _measure(
    service: MemoryService, questions: list[str], sessions: SessionService
) -> dict[str, Any]:
    server = create_mcp_server(service, fixed_principal(AGENT), sessions=sessions)
    sizes: list[int] = []
    wire: list[int] = []
    texts: list[int] = []
    hits: list[int] = []
    async with Client(server) as client:
        tools = await client.list_tools()
        tool_list = len(tools.model_dump_json(by_alias=True, exclude_none=True))
        for question in questions:
            result = await client.call_tool("memory_recall", {"query": question})
            assert not result.is_error, result
            sizes.append(_content_chars(result))
            wire.append(len(result.model_dump_json(by_alias=True, exclude_none=True)))
            if result.structured_content is None:  # compact lines: read the texts in full JSON
                full = await client.call_tool("memory_recall", {"query": question, "verbose": True})
                data = _structure(full)
            else:
                data = _structure(result)
            texts.append(sum(len(hit.get("memory", hit)["text"]) for hit in data["results"]))
            hits.append(len(data["results"]))
    ratios = [size / text for size, text in zip(sizes, texts, strict=True) if text]
    return {
        "calls": len(sizes),
        "hits_mean": round(statistics.fmean(hits), 2),
        "answer_chars_mean": round(statistics.fmean(sizes), 1),
        "answer_json_rpc_result_chars_mean": round(statistics.fmean(wire), 1),
        "memory_text_chars_mean": round(statistics.fmean(texts), 1),
        "memory_text_share": round(sum(texts) / sum(sizes), 4),
        "answer_over_text_mean": round(statistics.fmean(ratios), 3),
        "answer_over_text_max": round(max(ratios), 3),
        "json_rpc_result_over_text_mean": round(sum(wire) / sum(texts), 3),
        "tools": len(tools.tools),
        "tool_list_chars": tool_list,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    corpus = generate(args.seed, args.conversations)
    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings({"database": str(Path(folder) / "size.db")}, environ={})
        store = SQLiteStore(settings.database)
        service = MemoryService(store, LocalEmbedder(), Limits())
        runtime = build_runtime(settings, service)
        stored = 0
        for chat in corpus.conversations:
            for session in chat.sessions:
                for turn in session.turns:
                    if turn.speaker == chat.user:
                        service.remember(
                            AGENT,
                            turn.text,
                            observed_at=turn.observed_at.isoformat(),
                            scope="agent",
                        )
                        stored += 1
        questions = [q.text for q in corpus.queries][: args.queries]
        report = anyio.run(_measure, service, questions, runtime.sessions)
        runtime.close()
        store.close()
    print(json.dumps({"memories": stored, **report}, indent=2))


if __name__ == "__main__":
    main()
