"""The OpenAI Agents SDK over Quipu (issue 27): a session whose history lives in Quipu's
session tier, and ``remember`` / ``recall`` as function tools.

``QuipuSession(client, session_id)`` implements the SDK's ``Session`` protocol: every item a
run adds is one Quipu session turn (so it expires with the session TTL, is bounded like every
turn, is screened for secrets, and can be promoted into long-term memory with
:meth:`QuipuSession.promote`). An item's longest text is the turn's content, so promotion
reads the conversation as text; the rest of the item rides in the turn's metadata and is put
back together exactly by ``get_items``. Quipu's session tier is append-only: ``pop_item`` and
``clear_session`` append a marker turn that later reads honour, and the turns themselves go
when the session expires.

``memory_tools(client)`` gives the agent ``remember`` and ``recall`` in one scope. Both take a
:class:`quipu.MemoryClient` (the embedded ``quipu.open(path)`` or ``quipu.Client``); its calls
run in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any, ClassVar

from agents import FunctionTool, function_tool
from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings

from quipu.core.jobs import Job
from quipu.core.sessions import SessionTurn
from quipu.errors import QuipuError
from quipu.remote import MemoryClient
from quipu.safety import render_data_block

__all__ = ["QuipuSession", "memory_tools"]

#: The metadata field of a turn holding the SDK's item (without its longest text).
FIELD = "openai_agents"
#: A turn of history read per request.
PAGE = 500
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class QuipuSession:
    """An Agents SDK session stored as a Quipu session (SESSION-1..3, PROMO-1)."""

    session_settings: ClassVar[SessionSettings | None] = None

    def __init__(self, client: MemoryClient, session_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self._session = client.session(session_id)

    def __repr__(self) -> str:
        return f"QuipuSession({self.session_id!r})"

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items in order; with ``limit``, the latest ``limit`` of them."""
        items = [item for _, item in await asyncio.to_thread(self._live)]
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await asyncio.to_thread(self._append_all, items)

    async def pop_item(self) -> TResponseInputItem | None:
        def pop() -> TResponseInputItem | None:
            live = self._live()
            if not live:
                return None
            seq, item = live[-1]
            self._session.append(
                "system", f"(item {seq} withdrawn)", metadata={FIELD: {"pop": seq}}
            )
            return item

        return await asyncio.to_thread(pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(
            self._session.append, "system", "(history cleared)", metadata={FIELD: {"clear": True}}
        )

    def promote(self, *, wait: bool = False) -> Job:
        """Queue promotion of this conversation into long-term memory (PROMO-1)."""
        return self._session.promote(wait=wait)

    # -- turns <-> items ---------------------------------------------------------------------
    def _append_all(self, items: list[TResponseInputItem]) -> None:
        for item in items:
            role, content, rest = _split(dict(item))
            self._session.append(role, content, metadata={FIELD: rest})

    def _live(self) -> list[tuple[int, TResponseInputItem]]:
        """The items still in the history, with their turn numbers, honouring markers."""
        live: dict[int, TResponseInputItem] = {}
        for turn in self._turns():
            held = turn.metadata.get(FIELD)
            if not isinstance(held, dict):
                continue
            if held.get("clear") is True:
                live.clear()
            elif isinstance(held.get("pop"), int):
                live.pop(held["pop"], None)
            elif "item" in held:
                live[turn.seq] = _join(turn.content, held)
        return list(live.items())

    def _turns(self) -> list[SessionTurn]:
        turns: list[SessionTurn] = []
        while True:
            page = self._session.history(after=turns[-1].seq if turns else 0, limit=PAGE)
            turns.extend(page)
            if len(page) < PAGE:
                return turns


def _split(item: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The turn of one item: a role, the item's longest text as content, and the rest."""
    role = _ROLES.get(
        str(item.get("role")), "tool" if "output" in str(item.get("type")) else "assistant"
    )
    path, text = _longest_text(item, ())
    if path is None or not text.strip():
        summary = json.dumps(item, ensure_ascii=False, sort_keys=True)[:200]
        return role, f"[{item.get('type', 'item')}] {summary}", {"item": item, "path": None}
    rest = copy.deepcopy(item)
    _place(rest, path, None)
    return role, text, {"item": rest, "path": list(path)}


def _join(content: str, held: dict[str, Any]) -> Any:
    item = copy.deepcopy(held["item"])
    path = held.get("path")
    if path is not None:
        _place(item, tuple(path), content)
    return item


def _longest_text(value: Any, at: tuple[Any, ...]) -> tuple[tuple[Any, ...] | None, str]:
    best: tuple[tuple[Any, ...] | None, str] = (None, "")
    if isinstance(value, str):
        return at, value
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        if len(at) < 8:
            path, text = _longest_text(child, (*at, key))
            if path is not None and len(text) > len(best[1]):
                best = (path, text)
    return best


def _place(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


# -- tools -------------------------------------------------------------------------------------
def memory_tools(client: MemoryClient, *, scope: str = "agent", k: int = 5) -> list[FunctionTool]:
    """``remember`` and ``recall`` as Agents SDK function tools, both in ``scope``. A refused
    call (a secret, a bad kind, a limit) reaches the model as ``error <code>: <message>``."""

    async def remember(text: str, kind: str = "fact") -> str:
        """Store one durable memory (a fact, preference, decision or procedure worth keeping
        beyond this conversation). An exact duplicate is not stored twice.

        Args:
            text: The memory, one self-contained statement.
            kind: fact, preference, decision, procedure or episode.
        """
        try:
            result = await asyncio.to_thread(client.remember_result, text, scope=scope, kind=kind)
        except QuipuError as exc:
            return f"error {exc.code}: {exc.message}"
        said = "remembered" if result.created else "already known"
        return f"{said}: {result.memory.id}"

    async def recall(query: str) -> str:
        """Find stored memories relevant to a question (keyword and meaning). Call it before
        answering anything that depends on what you were told earlier.

        Args:
            query: What you want to know, in a few words.
        """
        try:
            found = await asyncio.to_thread(client.recall, query, scope=scope, k=k)
        except QuipuError as exc:
            return f"error {exc.code}: {exc.message}"
        if not found.results:
            return "no memories found"
        # SAFE-2: memory text reaches the model defanged, in a block that says it is data
        lines = [
            f"[{h.memory.kind.value}] {h.memory.text} (id {h.memory.id}, score {h.score:.2f})"
            for h in found.results
        ]
        count = len(lines)
        summary = f"found {count} {'memory' if count == 1 else 'memories'}:"
        return f"{summary}\n{render_data_block(lines, 'memory')}"

    return [function_tool(remember), function_tool(recall)]
