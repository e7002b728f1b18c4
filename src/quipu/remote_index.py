"""The memory index and harvest on the HTTP clients (issue 24: CONSOL-1, HARVEST-1, API-3).

``index_get`` never fails an agent's turn: when the server cannot be reached or answers that
the store is unavailable (a transient error), it returns an empty index flagged ``degraded``
with the error's code as the reason, as the embedded client does for its store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from quipu import wire_index as wi
from quipu.consolidation.index import IndexView, empty_view
from quipu.errors import QuipuError
from quipu.harvest import Receipt
from quipu.wire import Call

T = TypeVar("T")


class IndexCalls:
    """The index and harvest methods of :class:`quipu.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def index_get(self, *, scope: str = "agent") -> IndexView:
        """The scope's compiled memory index, framed as data (degraded, never an error, when
        the server or its store is out)."""
        try:
            return self._send(wi.index_get(scope))
        except QuipuError as exc:
            if not exc.transient:
                raise
            return empty_view(scope, degraded=True, reason=exc.code)

    def index_history(
        self, *, scope: str = "agent", before: int | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        return self._send(wi.index_history({"scope": scope, "before": before, "limit": limit}))

    def index_diff(
        self,
        from_version: int | None = None,
        to_version: int | None = None,
        *,
        scope: str = "agent",
    ) -> dict[str, Any]:
        params = {"scope": scope, "from_version": from_version, "to_version": to_version}
        return self._send(wi.index_diff(params))

    def index_rebuild(self, *, scope: str = "agent") -> dict[str, Any]:
        return self._send(wi.index_rebuild(scope))

    def harvest(
        self,
        spans: Sequence[str | dict[str, str]],
        *,
        boundary: str = "compaction",
        scope: str = "agent",
        session_id: str | None = None,
    ) -> Receipt:
        """Hand over spans about to leave the context window (HARVEST-1); answers at once."""
        body = {"spans": list(spans), "boundary": boundary, "session_id": session_id}
        return self._send(wi.harvest(scope, body))


class AsyncIndexCalls:
    """The methods of :class:`IndexCalls` on :class:`quipu.AsyncClient`, awaited."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def index_get(self, *, scope: str = "agent") -> IndexView:
        try:
            return await self._send(wi.index_get(scope))
        except QuipuError as exc:
            if not exc.transient:
                raise
            return empty_view(scope, degraded=True, reason=exc.code)

    async def index_history(
        self, *, scope: str = "agent", before: int | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        params = {"scope": scope, "before": before, "limit": limit}
        return await self._send(wi.index_history(params))

    async def index_diff(
        self,
        from_version: int | None = None,
        to_version: int | None = None,
        *,
        scope: str = "agent",
    ) -> dict[str, Any]:
        params = {"scope": scope, "from_version": from_version, "to_version": to_version}
        return await self._send(wi.index_diff(params))

    async def index_rebuild(self, *, scope: str = "agent") -> dict[str, Any]:
        return await self._send(wi.index_rebuild(scope))

    async def harvest(
        self,
        spans: Sequence[str | dict[str, str]],
        *,
        boundary: str = "compaction",
        scope: str = "agent",
        session_id: str | None = None,
    ) -> Receipt:
        body = {"spans": list(spans), "boundary": boundary, "session_id": session_id}
        return await self._send(wi.harvest(scope, body))
