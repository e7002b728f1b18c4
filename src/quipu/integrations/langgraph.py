"""LangGraph's long-term memory store over Quipu: ``QuipuStore(client)`` (issue 27).

A LangGraph item is ``(namespace, key) -> value`` (a JSON object). Here it is one Quipu memory:

- **scope**: a namespace's first label picks the Quipu scope (``scopes={"users": "user"}``);
  every other namespace lives in ``scope`` (default ``agent``). Identity is the client's:
  an embedded :class:`quipu.Quipu`, or a :class:`quipu.Client` with a key or run token
  (``client.for_subject(agent_id=..., user_id=...)`` for one end user of a service).
- **text**: the value's text at the indexed fields (LangGraph's ``index``: the store's
  ``fields``, default the whole value as JSON; ``put(..., index=[...])`` for one item), which
  Quipu embeds and indexes; ``search(query=...)`` is Quipu's hybrid recall over it.
- **value, namespace and key** travel in the memory's metadata, and tags mark the namespace's
  prefixes and the key, so ``get``, ``search`` and ``list_namespaces`` are tag-filtered reads
  in one scope. A second ``put`` on a key writes a new memory and supersedes the old one
  (Quipu keeps the history); ``delete`` forgets it.

What Quipu adds and LangGraph's in-memory store lacks: values are screened like any memory
(a secret is refused with :class:`quipu.SecretDetected`; an injection-like value is
quarantined, so it is not returned), sizes are bounded (16 KB of value by default), and
``search(query=...)`` ranks by hybrid recall, not cosine alone. No TTLs (``supports_ttl`` is
False). ``abatch`` runs ``batch`` in a worker thread; both clients are thread-safe.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from quipu.core.records import MemoryVersion
from quipu.remote import MemoryClient

__all__ = ["QuipuStore"]

#: The tag every item carries, and the metadata field that holds its LangGraph identity.
MARK = "langgraph"
#: Rows a listing reads per request.
PAGE = 200
Namespace = tuple[str, ...]


class QuipuStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are Quipu memories (see the module docs)."""

    supports_ttl = False

    def __init__(
        self,
        client: MemoryClient,
        *,
        scope: str = "agent",
        scopes: Mapping[str, str] | None = None,
        fields: Sequence[str] | None = None,
        kind: str = "fact",
        max_k: int = 100,
        max_query_chars: int = 500,
    ) -> None:
        """``scopes`` maps a namespace's first label to a Quipu scope; ``fields`` are the
        value paths whose text is indexed (LangGraph's path syntax; ``["$"]`` is the whole
        value as JSON; by default every string in the value); ``max_k`` and
        ``max_query_chars`` are the server's recall bounds (a longer query is cut)."""
        self.client = client
        self.scope = scope
        self.scopes = dict(scopes or {})
        self.fields = None if fields is None else tuple(fields)
        self.kind = kind
        self.max_k = max_k
        self.max_query_chars = max_query_chars

    def __repr__(self) -> str:
        return f"QuipuStore({self.client!r}, scope={self.scope!r}, scopes={self.scopes!r})"

    # -- LangGraph's interface ---------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order (a later one sees what an earlier one wrote)."""
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:
                raise ValueError(f"unknown operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- operations --------------------------------------------------------------------------
    def scope_of(self, namespace: Namespace) -> str:
        return self.scopes.get(namespace[0], self.scope) if namespace else self.scope

    def _get(self, namespace: Namespace, key: str) -> Item | None:
        found = self._live(namespace, key)
        return _item(found[0]) if found else None

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        if not namespace or namespace[0] == MARK:
            raise InvalidNamespaceError(
                f"a namespace must be non-empty and not start with {MARK!r}"
            )
        if op.ttl is not None:
            raise NotImplementedError("QuipuStore does not support TTLs (supports_ttl is False)")
        old = self._live(namespace, op.key)
        if op.value is None:
            for memory in old:
                self.client.forget(memory.id, reason="langgraph delete")
            return
        value = dict(op.value)
        if old and _identity(old[0])["value"] == value and len(old) == 1:
            return  # the same value again: nothing to write
        created = (
            (_identity(old[-1]).get("created_at") or old[-1].recorded_at.isoformat())
            if old
            else None
        )
        memory = self._write(namespace, op.key, value, op.index, created)
        for previous in old:
            if previous.id != memory.id:
                self.client.supersede(
                    previous.id,
                    memory.id,
                    reason="langgraph put",
                    expected_version=previous.version,
                )

    def _write(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        index: Any,
        created_at: str | None,
    ) -> MemoryVersion:
        identity: dict[str, Any] = {
            "namespace": list(namespace),
            "key": key,
            "value": value,
            "created_at": created_at,
        }
        text = _text(value, self.fields if index is None else (() if index is False else index))
        tags = [MARK, *(_prefix_tag(namespace[:n]) for n in range(1, len(namespace) + 1))]
        tags.append(_key_tag(namespace, key))
        options: dict[str, Any] = {
            "scope": self.scope_of(namespace),
            "kind": self.kind,
            "tags": tags,
            "metadata": {MARK: identity},
        }
        result = self.client.remember_result(text, **options)
        if not result.created and _identity(result.memory).get("key") != key:
            # The same text is another item's memory (Quipu keeps one live copy of a text per
            # scope): this item's text names its key, so the two stay apart.
            label = "/".join([*namespace, key])
            result = self.client.remember_result(f"{text}\n[{label}]", **options)
        return result.memory

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        limit, offset = max(0, op.limit), max(0, op.offset)
        query = (op.query or "").strip()[: self.max_query_chars]
        wanted = offset + limit
        found: list[SearchItem] = []
        for scope in self._scopes_for(prefix[:1]):
            tag = _prefix_tag(prefix) if prefix else MARK
            rows: Iterable[tuple[MemoryVersion, float | None]]
            if query:
                k = min(self.max_k, self.max_k if op.filter else max(1, wanted))
                hits = self.client.recall(query, scope=scope, k=k, tags=[tag]).results
                rows = ((h.memory, h.score) for h in hits)
            else:
                rows = ((m, None) for m in self._scan(scope, [tag]))
            for memory, score in rows:
                item = _item(memory, score)
                if item is None or item.namespace[: len(prefix)] != prefix:
                    continue
                if op.filter and not _matches(item.value, op.filter):
                    continue
                found.append(item)
                if not query and len(found) >= wanted and len(self._scopes_for(prefix[:1])) == 1:
                    break
        if query:
            found.sort(key=lambda i: -(i.score or 0.0))
        else:
            found.sort(key=lambda i: i.updated_at, reverse=True)
        return found[offset : offset + limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        conditions = tuple(op.match_conditions or ())
        first = _first_label(conditions)
        seen: set[Namespace] = set()
        for scope in self._scopes_for(first):
            for memory in self._scan(scope, [MARK]):
                identity = _identity(memory)
                if identity:
                    seen.add(tuple(identity["namespace"]))
        namespaces = [ns for ns in seen if all(_condition(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # -- reads -------------------------------------------------------------------------------
    def _live(self, namespace: Namespace, key: str) -> list[MemoryVersion]:
        """The item's live memories, newest first (more than one only after racing puts)."""
        scope = self.scope_of(tuple(namespace))
        page = self.client.list(scope=scope, tags=[_key_tag(namespace, key)], limit=10)
        return [
            m
            for m in page.items
            if _identity(m).get("key") == key
            and tuple(_identity(m).get("namespace", ())) == tuple(namespace)
        ]

    def _scan(self, scope: str, tags: list[str]) -> Iterator[MemoryVersion]:
        cursor: str | None = None
        while True:
            page = self.client.list(scope=scope, tags=tags, cursor=cursor, limit=PAGE)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    def _scopes_for(self, first: Namespace) -> list[str]:
        """The scopes a read under a namespace starting with ``first`` must look in."""
        if first and first[0] != "*":
            return [self.scope_of(first)]
        return list(dict.fromkeys([self.scope, *self.scopes.values()]))


# -- helpers -----------------------------------------------------------------------------------
def _identity(memory: MemoryVersion) -> dict[str, Any]:
    found = memory.metadata.get(MARK)
    return found if isinstance(found, dict) else {}


def _item(memory: MemoryVersion, score: float | None = None) -> SearchItem | None:
    identity = _identity(memory)
    try:
        namespace = tuple(str(label) for label in identity["namespace"])
        key, value = str(identity["key"]), dict(identity["value"])
    except (KeyError, TypeError, ValueError):
        return None  # a memory of the scope that is not a LangGraph item
    created = identity.get("created_at")
    return SearchItem(
        namespace=namespace,
        key=key,
        value=value,
        created_at=datetime.fromisoformat(created) if created else memory.recorded_at,
        updated_at=memory.recorded_at,
        score=score,
    )


def _text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text Quipu indexes: the value's text at ``fields`` (every string in it when None),
    else the value as JSON."""
    texts: list[str] = []
    if fields is None:
        texts.extend(_strings(value))
    for path in fields or ():
        texts.extend(t for t in get_text_at_path(value, tokenize_path(path)) if t.strip())
    return "\n".join(texts) if texts else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """Every non-blank string in a JSON value, in order (bounded depth: values are bounded
    JSON already, this only stops a cycle-free but deep value early)."""
    if isinstance(value, str):
        if value.strip():
            yield value
    elif depth < 32 and isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif depth < 32 and isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, depth + 1)


def _digest(parts: Any) -> str:
    raw = json.dumps(parts, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _prefix_tag(prefix: Namespace) -> str:
    return f"{MARK}:ns:{_digest(list(prefix))}"


def _key_tag(namespace: Namespace, key: str) -> str:
    return f"{MARK}:key:{_digest([list(namespace), key])}"


def _first_label(conditions: tuple[MatchCondition, ...]) -> Namespace:
    for condition in conditions:
        if condition.match_type == "prefix" and condition.path:
            return tuple(condition.path[:1])
    return ()


def _condition(condition: MatchCondition, namespace: Namespace) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(want in ("*", have) for have, want in pairs)


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(_compare(value.get(name), expected) for name, expected in wanted.items())


def _compare(have: Any, expected: Any) -> bool:
    """LangGraph's filter semantics: exact match, nested objects, and the operators ``$eq``,
    ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``."""
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(have, op, operand) for op, operand in expected.items())
        return isinstance(have, Mapping) and all(
            _compare(have.get(k), v) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(expected)
            and all(_compare(h, e) for h, e in zip(have, expected, strict=True))
        )
    return bool(have == expected)


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"unsupported filter operator {op}")
    try:
        left, right = float(have), float(operand)
    except (TypeError, ValueError):
        return False
    return {
        "$gt": left > right,
        "$gte": left >= right,
        "$lt": left < right,
        "$lte": left <= right,
    }[op]
