"""The MCP server over stdio (``quipu mcp``), answering every line it is sent.

The SDK's stdio transport drops a line it cannot parse or validate: the client waits for an
answer that never comes (issue 20 defect 13: a lone surrogate or 300-deep arguments in a
``tools/call``). Here each line is checked first (:func:`quipu.surfaces.mcp.screen.line_error`)
and a line the SDK would drop is answered with a JSON-RPC error on the SDK's own write stream;
every other line goes to the SDK unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import suppress
from io import TextIOWrapper
from typing import Any, Protocol, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from quipu.surfaces.mcp.screen import line_error


async def serve_stdio(server: MCPServer, lines: AsyncIterable[str] | None = None) -> None:
    """Serve ``server`` on stdin/stdout (or on ``lines`` and stdout)."""
    wrapper: TextIOWrapper | None = None
    if lines is None:
        wrapper = TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
        lines = anyio.wrap_file(wrapper)
    screened = ScreenedLines(lines)
    try:
        # The SDK only iterates ``stdin``; it claims stdout (fd 1) for the protocol itself.
        async with stdio_server(stdin=cast(Any, screened)) as (read_stream, write_stream):
            screened.answer_into(write_stream)
            low = server._lowlevel_server
            await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        if wrapper is not None:
            with suppress(ValueError):
                wrapper.detach()  # stdin's buffer is not ours to close


class Replies(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class ScreenedLines:
    """The lines of stdin the SDK can read; the others are answered here."""

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines
        self._replies: Replies | None = None
        self._ready = anyio.Event()

    def answer_into(self, replies: Replies) -> None:
        self._replies = replies
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._screen()

    async def _screen(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if not line.strip():
                continue
            error = line_error(line)
            if error is None:
                yield line
                continue
            await self._ready.wait()
            assert self._replies is not None
            try:
                await self._replies.send(SessionMessage(error))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
