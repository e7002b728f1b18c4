"""``remember_many`` on :class:`quipu.Client` and :class:`quipu.AsyncClient` (issue 23): the
name, arguments and answer of the embedded :class:`quipu.Quipu`'s, over ``POST
/v1/memories/batch``. Each refused item comes back as the typed error the server raised."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from quipu.core.records import WriteResult
from quipu.errors import QuipuError
from quipu.wire import Call, error_from_item, wire, write_result_from_dict

T = TypeVar("T")

Outcome = WriteResult | QuipuError


def _outcomes(data: Mapping[str, Any]) -> list[Outcome]:
    out: list[Outcome] = []
    for item in data["results"]:
        if "error" in item:
            out.append(error_from_item(int(item["status"]), item["error"]))
        else:
            out.append(write_result_from_dict(item))
    return out


def remember_many_call(items: Sequence[str | Mapping[str, Any]], scope: str) -> Call[list[Outcome]]:
    body = {
        "scope": scope,
        "items": [
            item if isinstance(item, str) else {k: wire(v) for k, v in item.items()}
            for item in items
        ],
    }
    return Call("POST", "/v1/memories/batch", _outcomes, json=body)


class BatchCalls:
    """The bulk write on :class:`quipu.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def remember_many(
        self, items: Sequence[str | Mapping[str, Any]], *, scope: str = "agent"
    ) -> list[Outcome]:
        """Store each of ``items`` in ``scope`` in one call; one result per item, in order:
        its :class:`WriteResult` or the error that refused that item alone."""
        return self._send(remember_many_call(items, scope))


class AsyncBatchCalls:
    """:class:`BatchCalls` on :class:`quipu.AsyncClient`, awaited."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def remember_many(
        self, items: Sequence[str | Mapping[str, Any]], *, scope: str = "agent"
    ) -> list[Outcome]:
        return await self._send(remember_many_call(items, scope))
