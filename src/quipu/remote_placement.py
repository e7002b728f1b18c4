"""The placement policy method of :class:`quipu.Client` and :class:`quipu.AsyncClient` (issue
26, GRAPH-2): ``graph_placement``, with the name, arguments and answer (the JSON of
``GET``/``PUT /v1/graph/placement``) of the embedded :class:`quipu.Quipu`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from quipu.wire import Call

T = TypeVar("T")


def _same(data: Any) -> dict[str, Any]:
    return dict(data)


def placement_call(
    types: Sequence[Mapping[str, Any]] | None,
    isolated: Sequence[str] | None,
    expected_version: int | None,
    reason: str | None,
    version: int | None,
) -> Call[dict[str, Any]]:
    if types is None and isolated is None:
        params = {} if version is None else {"version": version}
        return Call("GET", "/v1/graph/placement", _same, params=params)
    body: dict[str, Any] = {
        "types": None if types is None else [dict(t) for t in types],
        "isolated": None if isolated is None else list(isolated),
        "expected_version": expected_version,
        "reason": reason,
    }
    return Call(
        "PUT",
        "/v1/graph/placement",
        _same,
        json={k: v for k, v in body.items() if v is not None},
    )


class PlacementCalls:
    """The placement policy on :class:`quipu.Client`."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def graph_placement(
        self,
        *,
        types: Sequence[Mapping[str, Any]] | None = None,
        isolated: Sequence[str] | None = None,
        expected_version: int | None = None,
        reason: str | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """The tenant's placement policy (GRAPH-2), or ``version`` of it; with ``types`` or
        ``isolated``, declare a new version first (admin keys)."""
        return self._send(placement_call(types, isolated, expected_version, reason, version))


class AsyncPlacementCalls:
    """:class:`PlacementCalls` on :class:`quipu.AsyncClient`, awaited."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def graph_placement(
        self,
        *,
        types: Sequence[Mapping[str, Any]] | None = None,
        isolated: Sequence[str] | None = None,
        expected_version: int | None = None,
        reason: str | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        return await self._send(placement_call(types, isolated, expected_version, reason, version))
