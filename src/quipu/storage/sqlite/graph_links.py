"""The entity graph's read for recall's multi-hop signal on SQLite (a mixin of
:class:`SQLiteStore`; issue 26). Read only: the graph is written by
:mod:`quipu.storage.sqlite.graph`. A node is an entity's folded name (see
:class:`quipu.core.graph_links.GraphLinks`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from quipu.core.graph_links import GraphLinks
from quipu.core.records import ScopeRef

_PART = "e.tenant_id = ? AND e.scope = ? AND e.owner = ?"
#: An entity with its mentions (``e``, ``g``). SQLite joins a CROSS JOIN in the order written:
#: from the entities by folded name, each one's mentions by key prefix.
_NAMED = (
    "graph_entities e CROSS JOIN graph_mentions g ON g.tenant_id = e.tenant_id"
    " AND g.scope = e.scope AND g.owner = e.owner AND g.entity_id = e.entity_id"
)
#: ... and the current active memory row of each mention (``m``).
_ROWS = (
    f"{_NAMED} CROSS JOIN memory_versions m ON m.tenant_id = g.tenant_id AND m.id = g.memory_id"
    " AND m.is_current = 1 AND m.status = 'active'"
)
#: From memory rows by key to the entities they name: each row by key, its mentions by memory
#: id (its index named: without statistics SQLite would scan the partition's mentions),
#: their entities by key.
_NAMES_OF = (
    "memory_versions m CROSS JOIN graph_mentions g INDEXED BY graph_mentions_memory"
    " ON g.tenant_id = m.tenant_id AND g.memory_id = m.id AND g.scope = m.scope"
    " AND g.owner = m.owner"
    " CROSS JOIN graph_entities e ON e.tenant_id = g.tenant_id AND e.scope = g.scope"
    " AND e.owner = g.owner AND e.entity_id = g.entity_id"
)
_ROW_PART = "m.tenant_id = ? AND m.scope = ? AND m.owner = ?"


def _marks(items: Sequence[object]) -> str:
    return ",".join("?" for _ in items) or "NULL"


class GraphLinkReads:
    """``Store.graph_links`` on SQLite; needs the store's ``_reader()``."""

    def _reader(self) -> sqlite3.Connection:
        raise NotImplementedError

    def graph_links(
        self, ref: ScopeRef, keys: Sequence[int], names: Sequence[str], fanout: int
    ) -> GraphLinks:
        part = (ref.tenant_id, ref.scope.value, ref.owner)
        keys, names = list(keys), list(names)
        c = self._reader()
        row_nodes: dict[int, set[str]] = {}
        for key, node in c.execute(
            f"SELECT m.key, e.folded FROM {_NAMES_OF} WHERE m.key IN ({_marks(keys)})"
            f" AND m.is_current = 1 AND m.status = 'active' AND {_ROW_PART}",
            (*keys, *part),
        ):
            row_nodes.setdefault(int(key), set()).add(str(node))
        asked = sorted(
            str(r[0])
            for r in c.execute(
                f"SELECT e.folded FROM graph_entities e WHERE {_PART} AND e.folded IN"
                f" ({_marks(names)}) UNION SELECT e.folded FROM graph_aliases a JOIN"
                " graph_entities e ON e.tenant_id = a.tenant_id AND e.scope = a.scope"
                f" AND e.owner = a.owner AND e.entity_id = a.entity_id WHERE {_PART}"
                f" AND a.folded IN ({_marks(names)})",
                (*part, *names, *part, *names),
            )
        )
        nodes = sorted(set(asked).union(*row_nodes.values()))
        mentions = {
            str(r[0]): int(r[1])
            for r in c.execute(
                f"SELECT e.folded, COUNT(DISTINCT g.memory_id) FROM {_NAMED} WHERE {_PART}"
                f" AND e.folded IN ({_marks(nodes)}) GROUP BY e.folded",
                (*part, *nodes),
            )
        }
        narrow = [n for n in nodes if mentions.get(n, 0) <= fanout]
        node_rows: dict[str, set[int]] = {}
        for node, key in c.execute(
            f"SELECT e.folded, m.key FROM {_ROWS} WHERE {_PART} AND e.folded IN ({_marks(narrow)})",
            (*part, *narrow),
        ):
            node_rows.setdefault(str(node), set()).add(int(key))
        return GraphLinks.of(row_nodes, asked, mentions, node_rows)
