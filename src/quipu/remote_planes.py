"""The key/value, documents and search methods of :class:`quipu.Client` and
:class:`quipu.AsyncClient` (issue 28: KV-1, DOC-1, RECALL-8): ``client.kv``,
``client.documents`` and ``client.search``, with the names, arguments and results of the
embedded :class:`quipu.Quipu`'s ``kv``, ``documents`` and ``search``, over every route of the
planes in the HTTP API. Refusals come back as the library's typed errors and codes.

Each method sends the request :mod:`quipu.wire_planes` spells; the sync and async classes
differ only in awaiting it.
"""

from __future__ import annotations

import base64
import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from quipu import wire
from quipu import wire_planes as wp
from quipu.core.documents import Document
from quipu.core.kv import KVEntry
from quipu.kv import KVPage
from quipu.wire import Call, Instant

T = TypeVar("T")


def _add_body(
    content: str | bytes,
    title: str,
    media_type: str,
    scope: str,
    metadata: Mapping[str, Any] | None,
    reason: str | None,
) -> dict[str, Any]:
    if isinstance(content, bytes):  # a PDF's bytes travel as base64 (POST /v1/documents)
        content = base64.b64encode(content).decode("ascii")
    return wire.given(
        {
            "content": content,
            "title": title,
            "media_type": media_type,
            "scope": scope,
            "metadata": metadata,
            "reason": reason,
        }
    )


class RemoteKeyValues:
    """``Client.kv``: the key/value plane of one server, as the key of the client sees it."""

    def __init__(self, send: Callable[[Call[Any]], Any]) -> None:
        self._send = send

    def set(
        self,
        key: str,
        value: Any,
        *,
        scope: str = "agent",
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> KVEntry:
        body = wire.given({"expected_version": expected_version, "reason": reason})
        body["value"] = value  # None is a value here, not an unset argument
        entry: KVEntry = self._send(wp.kv_set(key, scope, body))
        return entry

    def get(self, key: str, *, scope: str = "agent", as_of: Instant | None = None) -> KVEntry:
        entry: KVEntry = self._send(wp.kv_get(key, wire.given({"scope": scope, "as_of": as_of})))
        return entry

    def delete(
        self,
        key: str,
        *,
        scope: str = "agent",
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> KVEntry:
        body = wire.given({"expected_version": expected_version, "reason": reason})
        entry: KVEntry = self._send(wp.kv_delete(key, scope, body))
        return entry

    def history(self, key: str, *, scope: str = "agent") -> builtins.list[KVEntry]:
        found: builtins.list[KVEntry] = self._send(wp.kv_history(key, scope))
        return found

    def erase(self, key: str, *, scope: str = "agent", reason: str) -> dict[str, Any]:
        found: dict[str, Any] = self._send(wp.kv_erase(key, scope, {"reason": reason}))
        return found

    def list(
        self,
        *,
        prefix: str = "",
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        as_of: Instant | None = None,
    ) -> KVPage:
        params = wire.given(
            {"prefix": prefix, "scope": scope, "cursor": cursor, "limit": limit, "as_of": as_of}
        )
        page: KVPage = self._send(wp.kv_list(params))
        return page


class RemoteDocuments:
    """``Client.documents``: the documents plane of one server."""

    def __init__(self, send: Callable[[Call[Any]], Any]) -> None:
        self._send = send

    def add(
        self,
        content: str | bytes,
        *,
        title: str,
        media_type: str = "text/plain",
        scope: str = "agent",
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        body = _add_body(content, title, media_type, scope, metadata, reason)
        added: dict[str, Any] = self._send(wp.document_add(body))
        return added

    def search(self, query: str, *, scope: str = "agent", k: int | None = None) -> dict[str, Any]:
        body = wire.given({"query": query, "scope": scope, "k": k})
        found: dict[str, Any] = self._send(wp.document_search(body))
        return found

    def read(
        self, document_id: str, *, start: int = 0, end: int | None = None, scope: str = "agent"
    ) -> dict[str, Any]:
        params = wire.given({"start": start, "end": end, "scope": scope})
        found: dict[str, Any] = self._send(wp.document_read(document_id, params))
        return found

    def get(self, document_id: str, *, scope: str = "agent") -> Document:
        found: Document = self._send(wp.document_get(document_id, scope))
        return found

    def erase(self, document_id: str, *, scope: str = "agent", reason: str) -> dict[str, Any]:
        found: dict[str, Any] = self._send(
            wp.document_erase(document_id, scope, {"reason": reason})
        )
        return found

    def delete(
        self, document_id: str, *, scope: str = "agent", reason: str | None = None
    ) -> Document:
        body = wire.given({"reason": reason})
        found: Document = self._send(wp.document_delete(document_id, scope, body))
        return found

    def list(
        self, *, scope: str = "agent", cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        params = wire.given({"scope": scope, "cursor": cursor, "limit": limit})
        found: dict[str, Any] = self._send(wp.document_list(params))
        return found


class PlaneCalls:
    """``kv``, ``documents`` and ``search`` on :class:`quipu.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    @property
    def kv(self) -> RemoteKeyValues:
        """The key/value plane (KV-1): ``client.kv.set(key, value)``, ``.get(key).value``."""
        return RemoteKeyValues(self._send)

    @property
    def documents(self) -> RemoteDocuments:
        """The documents plane (DOC-1): ``client.documents.add(text, title=...)``, ..."""
        return RemoteDocuments(self._send)

    def search(
        self,
        query: str,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Every plane of one scope at once, each row labelled with its plane (RECALL-8)."""
        body = wire.given({"query": query, "scope": scope, "k": k, "planes": planes})
        return self._send(wp.search(body))


# -- awaited ------------------------------------------------------------------------------------
ASend = Callable[[Call[Any]], Awaitable[Any]]


class AsyncKeyValues:
    """``AsyncClient.kv``: the methods of :class:`RemoteKeyValues`, awaited."""

    def __init__(self, send: ASend) -> None:
        self._send = send

    async def set(
        self,
        key: str,
        value: Any,
        *,
        scope: str = "agent",
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> KVEntry:
        body = wire.given({"expected_version": expected_version, "reason": reason})
        body["value"] = value
        entry: KVEntry = await self._send(wp.kv_set(key, scope, body))
        return entry

    async def get(self, key: str, *, scope: str = "agent", as_of: Instant | None = None) -> KVEntry:
        params = wire.given({"scope": scope, "as_of": as_of})
        entry: KVEntry = await self._send(wp.kv_get(key, params))
        return entry

    async def delete(
        self,
        key: str,
        *,
        scope: str = "agent",
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> KVEntry:
        body = wire.given({"expected_version": expected_version, "reason": reason})
        entry: KVEntry = await self._send(wp.kv_delete(key, scope, body))
        return entry

    async def history(self, key: str, *, scope: str = "agent") -> builtins.list[KVEntry]:
        found: builtins.list[KVEntry] = await self._send(wp.kv_history(key, scope))
        return found

    async def erase(self, key: str, *, scope: str = "agent", reason: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._send(wp.kv_erase(key, scope, {"reason": reason}))
        return found

    async def list(
        self,
        *,
        prefix: str = "",
        scope: str = "agent",
        cursor: str | None = None,
        limit: int | None = None,
        as_of: Instant | None = None,
    ) -> KVPage:
        params = wire.given(
            {"prefix": prefix, "scope": scope, "cursor": cursor, "limit": limit, "as_of": as_of}
        )
        page: KVPage = await self._send(wp.kv_list(params))
        return page


class AsyncDocuments:
    """``AsyncClient.documents``: the methods of :class:`RemoteDocuments`, awaited."""

    def __init__(self, send: ASend) -> None:
        self._send = send

    async def add(
        self,
        content: str | bytes,
        *,
        title: str,
        media_type: str = "text/plain",
        scope: str = "agent",
        metadata: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        body = _add_body(content, title, media_type, scope, metadata, reason)
        added: dict[str, Any] = await self._send(wp.document_add(body))
        return added

    async def search(
        self, query: str, *, scope: str = "agent", k: int | None = None
    ) -> dict[str, Any]:
        body = wire.given({"query": query, "scope": scope, "k": k})
        found: dict[str, Any] = await self._send(wp.document_search(body))
        return found

    async def read(
        self, document_id: str, *, start: int = 0, end: int | None = None, scope: str = "agent"
    ) -> dict[str, Any]:
        params = wire.given({"start": start, "end": end, "scope": scope})
        found: dict[str, Any] = await self._send(wp.document_read(document_id, params))
        return found

    async def get(self, document_id: str, *, scope: str = "agent") -> Document:
        found: Document = await self._send(wp.document_get(document_id, scope))
        return found

    async def erase(self, document_id: str, *, scope: str = "agent", reason: str) -> dict[str, Any]:
        call = wp.document_erase(document_id, scope, {"reason": reason})
        found: dict[str, Any] = await self._send(call)
        return found

    async def delete(
        self, document_id: str, *, scope: str = "agent", reason: str | None = None
    ) -> Document:
        body = wire.given({"reason": reason})
        found: Document = await self._send(wp.document_delete(document_id, scope, body))
        return found

    async def list(
        self, *, scope: str = "agent", cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        params = wire.given({"scope": scope, "cursor": cursor, "limit": limit})
        found: dict[str, Any] = await self._send(wp.document_list(params))
        return found


class AsyncPlaneCalls:
    """``kv``, ``documents`` and ``search`` on :class:`quipu.AsyncClient`."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    @property
    def kv(self) -> AsyncKeyValues:
        """The key/value plane (KV-1), awaited: ``await client.kv.get(key)``."""
        return AsyncKeyValues(self._send)

    @property
    def documents(self) -> AsyncDocuments:
        """The documents plane (DOC-1), awaited: ``await client.documents.search(q)``."""
        return AsyncDocuments(self._send)

    async def search(
        self,
        query: str,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Every plane of one scope at once, each row labelled with its plane (RECALL-8)."""
        body = wire.given({"query": query, "scope": scope, "k": k, "planes": planes})
        return await self._send(wp.search(body))
