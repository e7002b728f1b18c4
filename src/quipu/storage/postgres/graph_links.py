"""The entity graph's read for recall's multi-hop signal on PostgreSQL (a mixin of
:class:`PostgresStore`; issue 26). Read only: the graph is written by
:mod:`quipu.storage.postgres.graph`. A node is an entity's folded name (see
:class:`quipu.core.graph_links.GraphLinks`). Every statement names ``tenant_id`` (one shard
under Citus); the four reads share one connection."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from quipu.core.graph_links import GraphLinks
from quipu.core.records import ScopeRef

_PART = "e.tenant_id = %s AND e.scope = %s AND e.owner = %s"
#: An entity with its mentions (``e``, ``g``).
_NAMED = (
    "graph_entities e JOIN graph_mentions g ON g.tenant_id = e.tenant_id AND g.scope = e.scope"
    " AND g.owner = e.owner AND g.entity_id = e.entity_id"
)
#: ... and the current active memory row of each mention (``m``).
_ROWS = (
    f"{_NAMED} JOIN memory_versions m ON m.tenant_id = g.tenant_id AND m.id = g.memory_id"
    " AND m.is_current AND m.status = 'active'"
)


class GraphLinkReads:
    """``Store.graph_links`` on PostgreSQL; needs the store's ``_conn()``."""

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def graph_links(
        self, ref: ScopeRef, keys: Sequence[int], names: Sequence[str], fanout: int
    ) -> GraphLinks:
        part = (ref.tenant_id, ref.scope.value, ref.owner)
        row_nodes: dict[int, set[str]] = {}
        node_rows: dict[str, set[int]] = {}
        with self._conn() as conn:
            for key, node in conn.execute(
                f"SELECT m.key, e.folded FROM {_ROWS} WHERE {_PART} AND m.key = ANY(%s)",
                (*part, list(keys)),
            ).fetchall():
                row_nodes.setdefault(int(key), set()).add(str(node))
            asked = sorted(
                str(r[0])
                for r in conn.execute(
                    f"SELECT e.folded FROM graph_entities e WHERE {_PART} AND e.folded = ANY(%s)"
                    " UNION SELECT e.folded FROM graph_aliases a JOIN graph_entities e"
                    " ON e.tenant_id = a.tenant_id AND e.scope = a.scope AND e.owner = a.owner"
                    f" AND e.entity_id = a.entity_id WHERE {_PART} AND a.folded = ANY(%s)",
                    (*part, list(names), *part, list(names)),
                ).fetchall()
            )
            nodes = sorted(set(asked).union(*row_nodes.values()))
            mentions = {
                str(r[0]): int(r[1])
                for r in conn.execute(
                    f"SELECT e.folded, COUNT(DISTINCT g.memory_id) FROM {_NAMED} WHERE {_PART}"
                    " AND e.folded = ANY(%s) GROUP BY e.folded",
                    (*part, nodes),
                ).fetchall()
            }
            narrow = [n for n in nodes if mentions.get(n, 0) <= fanout]
            for node, key in conn.execute(
                f"SELECT e.folded, m.key FROM {_ROWS} WHERE {_PART} AND e.folded = ANY(%s)",
                (*part, narrow),
            ).fetchall():
                node_rows.setdefault(str(node), set()).add(int(key))
        return GraphLinks.of(row_nodes, asked, mentions, node_rows)
