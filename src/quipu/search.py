"""``search(query, scope)``: "where did I record this?" across every plane of one scope
(RECALL-8). Each row is labelled with its plane:

- ``facts`` and ``notes``: the memory recall (:meth:`MemoryService.recall`), a row per memory;
- ``documents``: document pointers (:meth:`DocumentService.search`), never a whole body;
- ``kv``: the entry whose key is exactly the query (exact key match only, no meaning);
- ``graph``: the facts about the entities the query names (:meth:`GraphService.recall`, one
  hop), each naming the memories it came from; read only when the selector asks for it.

Rows are merged in a deterministic order: an exact key match first, then the graph's facts (at
most a third of ``k``, newest recorded first: they carry no score on the recall scale), then by
score (both
searching planes run the same recall pipeline, so their scores are on one scale), then plane,
then id; at most ``k`` rows. A plane this configuration cannot serve (no embedder for
documents, a corpus pinned to another model) is left out and named in
``meta.unserved_planes`` with its reason, and ``meta.sources_applied`` is false: never a
silently narrower answer. One scope per call.
"""

from __future__ import annotations

import time
from typing import Any

from quipu.core import planes as plane_rules
from quipu.core import validate
from quipu.core.kv import KEY_PATTERN, MAX_KEY_CHARS
from quipu.core.records import Principal
from quipu.core.scopes import resolve_scope
from quipu.documents import DocumentService
from quipu.errors import Conflict, NotFound, Unavailable
from quipu.graph.service import GraphService
from quipu.kv import KeyValueService
from quipu.memories import MemoryService

#: What search reads when no selector is given: every plane but the graph (ask for it).
SEARCH_DEFAULT = frozenset({"facts", "notes", "documents", "kv"})
_ORDER = {name: at for at, name in enumerate(plane_rules.PLANES)}


class SearchService:
    """One search across the planes of one scope."""

    def __init__(
        self, memory: MemoryService, documents: DocumentService, kv: KeyValueService
    ) -> None:
        self.memory = memory
        self.documents = documents
        self.kv = kv

    def search(
        self,
        principal: Principal,
        query: object,
        *,
        scope: str = "agent",
        k: int | None = None,
        planes: object = None,
    ) -> dict[str, Any]:
        """``{results: [{plane, score, rank, ...}], meta}``: a memory row carries ``memory``,
        a document row ``document`` (a pointer), a key/value row ``entry``."""
        started = time.perf_counter()
        lim = self.memory.limits
        text = validate.query(query, max_chars=lim.max_query_chars)
        size = validate.bounded_int(
            lim.default_k if k is None else k, field="k", low=1, high=lim.max_k
        )
        chosen = plane_rules.parse(planes, default=SEARCH_DEFAULT)
        ref = resolve_scope(principal, scope)
        rows: list[dict[str, Any]] = []
        unserved: dict[str, str] = {}
        facts: list[dict[str, Any]] = []
        if "graph" in chosen:
            own = self.memory.graph
            graph = own if isinstance(own, GraphService) else GraphService(self.memory)
            found_graph = graph.recall(principal, text, scope=scope, hops=1, limit=size)
            for view in found_graph.facts[: max(1, size // 3)]:
                facts.append(
                    {
                        "plane": "graph",
                        "score": None,
                        "id": view.fact.fact_id,
                        "fact": view.to_dict(),
                    }
                )
        memory = chosen & plane_rules.MEMORY_PLANES
        if memory:
            found = self.memory.recall(principal, text, scope=scope, k=size, planes=sorted(memory))
            for hit in found.results:
                rows.append(
                    {
                        "plane": plane_rules.plane_of(hit.memory.kind),
                        "score": round(hit.score, 6),
                        "id": hit.memory.id,
                        "memory": hit.memory.to_dict(),
                        "matched": list(hit.matched),
                    }
                )
        if "documents" in chosen:
            try:
                pointers = self.documents.search(principal, text, scope=scope, k=size)
            except (Conflict, Unavailable) as exc:
                unserved["documents"] = exc.code
            else:
                for pointer in pointers["results"]:
                    rows.append(
                        {
                            "plane": "documents",
                            "score": pointer["score"],
                            "id": pointer["chunk_id"],
                            "document": pointer,
                        }
                    )
        exact: list[dict[str, Any]] = []
        if "kv" in chosen:
            key = text.strip()
            if len(key) <= MAX_KEY_CHARS and KEY_PATTERN.fullmatch(key):
                try:
                    entry = self.kv.get(principal, key, scope=scope)
                except NotFound:
                    pass
                else:
                    exact.append({"plane": "kv", "score": 1.0, "id": key, "entry": entry.to_dict()})
        rows.sort(key=lambda r: (-float(r["score"]), _ORDER[r["plane"]], str(r["id"])))
        results = (exact + facts + rows)[:size]
        for rank, row in enumerate(results, start=1):
            row["rank"] = rank
        counts = {name: sum(r["plane"] == name for r in results) for name in sorted(chosen)}
        return {
            "results": results,
            "meta": {
                "total": len(results),
                "limit": size,
                "scope": ref.scope.value,
                "planes": sorted(chosen - set(unserved)),
                "unserved_planes": [
                    {"plane": name, "reason": why} for name, why in sorted(unserved.items())
                ],
                "sources_applied": not unserved,
                "per_plane": counts,
                "total_ms": round((time.perf_counter() - started) * 1000.0, 3),
            },
        }
