"""The memory index and harvest operations of the HTTP API (issue 24: CONSOL-1, CONSOL-2,
HARVEST-1, API-3) as :class:`~quipu.wire.Call` values, and their answers as the types the
embedded client returns. Both HTTP clients send these (:mod:`quipu.remote_index`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from quipu.consolidation.index import IndexView
from quipu.harvest import Receipt
from quipu.wire import Call


def view_from_dict(data: dict[str, Any]) -> IndexView:
    built = data.get("built_at")
    return IndexView(
        scope=str(data["scope"]),
        version=int(data["version"]),
        lines=tuple(str(line) for line in data.get("lines", ())),
        text=str(data.get("text", "")),
        active=int(data.get("active", 0)),
        archived=int(data.get("archived", 0)),
        built_at=None if built is None else datetime.fromisoformat(str(built)),
        degraded=bool(data.get("degraded", False)),
        reason=data.get("reason"),
    )


def receipt_from_dict(data: dict[str, Any]) -> Receipt:
    return Receipt(
        batch_id=str(data["batch_id"]),
        accepted=bool(data["accepted"]),
        spans=int(data["spans"]),
        boundary=str(data["boundary"]),
        reason=data.get("reason"),
    )


def index_get(scope: str) -> Call[IndexView]:
    return Call("GET", "/v1/index", view_from_dict, params={"scope": scope})


def index_history(params: dict[str, Any]) -> Call[list[dict[str, Any]]]:
    def decode(data: Any) -> list[dict[str, Any]]:
        return list(data["items"])

    return Call("GET", "/v1/index/history", decode, params=_given(params))


def index_diff(params: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("GET", "/v1/index/diff", dict, params=_given(params))


def index_rebuild(scope: str) -> Call[dict[str, Any]]:
    return Call("POST", "/v1/index/rebuild", dict, params={"scope": scope})


def harvest(scope: str, body: dict[str, Any]) -> Call[Receipt]:
    return Call("POST", "/v1/harvest", receipt_from_dict, params={"scope": scope}, json=body)


def _given(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}
