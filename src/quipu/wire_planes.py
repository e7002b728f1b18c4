"""The key/value, documents and search routes of the HTTP API (issue 28: KV-1, DOC-1, RECALL-8)
as :class:`~quipu.wire.Call` values, and their answers turned back into the types the embedded
client returns. Both HTTP clients send these (:mod:`quipu.remote_planes`), so each operation is
spelled once, as :mod:`quipu.wire` does for memories.

Keys and document ids are checked here with the library's own rules (422 ``invalid_key`` /
``invalid_id``), so a key never reaches a URL it could escape from (``..``, ``?``, ``#``).
Answers carry no ``tenant_id`` or owner (the server never discloses them): the decoded entries
and documents have the empty string there, as memories do.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from quipu.core import kv as kv_rules
from quipu.core import validate
from quipu.core.documents import Document, DocumentStatus, MediaType
from quipu.core.kv import EntryStatus, KVEntry
from quipu.core.records import Scope
from quipu.kv import KVPage
from quipu.wire import Call


def _key_path(prefix: str, key: str) -> str:
    """``/v1/kv/<key>``: the key as the library checks it, its ``/`` kept (the route's path
    parameter takes them), every other character it may hold safe in a URL."""
    return prefix + quote(kv_rules.key(key), safe="/")


def _document_path(document_id: str) -> str:
    ident = validate.identifier(document_id, field="document_id")
    return "/v1/documents/" + quote(ident, safe="")


def _scope(scope: str) -> dict[str, Any]:
    return {"scope": scope}


# -- key/value (KV-1) --------------------------------------------------------------------------
def kv_set(key: str, scope: str, body: dict[str, Any]) -> Call[KVEntry]:
    return Call("PUT", _key_path("/v1/kv/", key), entry_from_dict, _scope(scope), body)


def kv_get(key: str, params: dict[str, Any]) -> Call[KVEntry]:
    return Call("GET", _key_path("/v1/kv/", key), entry_from_dict, params)


def kv_delete(key: str, scope: str, body: dict[str, Any]) -> Call[KVEntry]:
    return Call("DELETE", _key_path("/v1/kv/", key), entry_from_dict, _scope(scope), body)


def kv_history(key: str, scope: str) -> Call[list[KVEntry]]:
    def decode(data: Any) -> list[KVEntry]:
        return [entry_from_dict(e) for e in data["items"]]

    return Call("GET", _key_path("/v1/kv-history/", key), decode, _scope(scope))


def kv_erase(key: str, scope: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", _key_path("/v1/kv-erase/", key), _object, _scope(scope), body)


def kv_list(params: dict[str, Any]) -> Call[KVPage]:
    return Call("GET", "/v1/kv", page_from_dict, params)


# -- documents (DOC-1) -------------------------------------------------------------------------
def document_add(body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", "/v1/documents", _object, json=body)


def document_search(body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", "/v1/documents/search", _object, json=body)


def document_read(document_id: str, params: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("GET", _document_path(document_id) + "/text", _object, params)


def document_get(document_id: str, scope: str) -> Call[Document]:
    return Call("GET", _document_path(document_id), document_from_dict, _scope(scope))


def document_delete(document_id: str, scope: str, body: dict[str, Any]) -> Call[Document]:
    path = _document_path(document_id) + "/delete"
    return Call("POST", path, document_from_dict, _scope(scope), body)


def document_erase(document_id: str, scope: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", _document_path(document_id) + "/erase", _object, _scope(scope), body)


def document_list(params: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("GET", "/v1/documents", _object, params)


# -- one search across every plane (RECALL-8) --------------------------------------------------
def search(body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", "/v1/search", _object, json=body)


# -- answers -----------------------------------------------------------------------------------
def entry_from_dict(data: Mapping[str, Any]) -> KVEntry:
    ended = data.get("ended_at")
    return KVEntry(
        tenant_id="",
        scope=Scope(data["scope"]),
        owner="",
        key=str(data["key"]),
        version=int(data["version"]),
        value=data.get("value"),
        status=EntryStatus(data["status"]),
        actor=data.get("actor") or "",
        surface=str(data["surface"]),
        agent_id=data.get("agent_id"),
        reason=data.get("reason"),
        recorded_at=datetime.fromisoformat(data["recorded_at"]),
        ended_at=None if ended is None else datetime.fromisoformat(ended),
    )


def page_from_dict(data: Mapping[str, Any]) -> KVPage:
    return KVPage([entry_from_dict(e) for e in data["items"]], data.get("next_cursor"))


def document_from_dict(data: Mapping[str, Any]) -> Document:
    return Document(
        id=str(data["id"]),
        tenant_id="",
        scope=Scope(data["scope"]),
        owner="",
        title=str(data["title"]),
        media_type=MediaType(data["media_type"]),
        metadata=dict(data.get("metadata") or {}),
        chars=int(data["chars"]),
        chunks=int(data["chunks"]),
        status=DocumentStatus(data["status"]),
        version=int(data["version"]),
        actor=str(data["actor"]),
        surface=str(data["surface"]),
        agent_id=data.get("agent_id"),
        recorded_at=datetime.fromisoformat(data["recorded_at"]),
        embedding_model=str(data["embedding_model"]),
        reason=data.get("reason"),
        withheld=list(data.get("withheld") or []),
    )


def _object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError("expected a JSON object")
    return data
