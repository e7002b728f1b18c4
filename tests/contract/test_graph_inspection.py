"""An operator reads any subject's entity graph (issue 29, OPS-4 on GRAPH-1) on every backend:
the entities list (type and name-prefix filters, current fact counts, keyset pages), one entity
with its facts now / as of / with the closed ones and what closed them, what one memory put in
the graph; admins only, another tenant's or subject's entity is the one 404, hostile cursors
and prefixes are a 422, never a driver error."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from quipu.core.records import Principal, Role
from quipu.errors import Forbidden, InvalidInput, NotFound
from quipu.governance import GovernanceService
from quipu.graph.inspection import GraphInspection
from quipu.graph.service import GraphService
from quipu.memories import MemoryService

T0 = datetime(2024, 1, 1, tzinfo=UTC)
AGENT = Principal("t1", "key-bot", Role.AGENT, agent_id="bot", user_id="u-17")
ADMIN = Principal("t1", "key-admin", Role.ADMIN)
OTHER_ADMIN = Principal("t2", "key-admin-2", Role.ADMIN)
USER = {"scope": "user", "owner": "u-17"}


@pytest.fixture
def graph(service: MemoryService) -> GraphInspection:
    service.graph = GraphService(service)  # extraction at write time, as `quipu serve` does
    return GraphInspection(service)


def _names(page: object) -> list[str]:
    return [r.entity.name for r in page.rows]  # type: ignore[attr-defined]


def test_ops_4_graph_entities_list_filters_counts_and_pages(
    service: MemoryService, graph: GraphInspection
) -> None:
    service.remember(AGENT, "Anna Kowalski lives in Lyon.", scope="user", valid_at=T0)
    service.remember(AGENT, "Anna Kowalski works at Acme Labs.", scope="user")
    service.remember(AGENT, "Andrew Stone visited Paris.", scope="user")
    page = graph.entities(ADMIN, **USER)
    names = _names(page)
    assert {"Anna Kowalski", "Lyon", "Acme Labs", "Andrew Stone", "Paris"} <= set(names)
    counts = {r.entity.name: r.current_facts for r in page.rows}
    assert counts["Anna Kowalski"] == 2 and counts["Lyon"] == 1  # subject and object sides
    assert _names(graph.entities(ADMIN, **USER, prefix="  an")) == ["Andrew Stone", "Anna Kowalski"]
    assert _names(graph.entities(ADMIN, **USER, prefix="ANNA K")) == ["Anna Kowalski"]
    assert set(_names(graph.entities(ADMIN, **USER, types=["place"]))) == {"Lyon", "Paris"}
    # keyset pages of one: every entity once, most recently seen first
    seen: list[str] = []
    cursor = None
    while True:
        one = graph.entities(ADMIN, **USER, limit=1, cursor=cursor)
        seen += _names(one)
        cursor = one.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(names) and len(seen) == len(set(seen))
    # another subject's graph is its own: the agent scope of "bot" holds none of it
    assert _names(graph.entities(ADMIN, scope="agent", owner="bot")) == []
    events = service.store.list_audit("t1", None, 50)
    assert any(e.action == "graph.inspect" for e in events)


def test_ops_4_graph_entity_now_as_of_and_invalidated_with_closer(
    service: MemoryService, graph: GraphInspection
) -> None:
    first = service.remember(AGENT, "Anna Kowalski lives in Lyon.", scope="user")
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    second = service.remember(AGENT, "Anna Kowalski moved to Marseille.", scope="user")
    moved = second.memory.valid_at
    anna = next(
        r.entity for r in graph.entities(ADMIN, **USER).rows if r.entity.name == "Anna Kowalski"
    )
    now = graph.entity(ADMIN, anna.entity_id, **USER)
    assert [(v.fact.predicate, v.object.name) for v in now.facts if v.object] == [
        ("lives_in", "Marseille")
    ]
    assert now.facts[0].memory_ids == (second.memory.id,)
    every = graph.entity(ADMIN, anna.entity_id, **USER, include_invalidated=True)
    lyon = next(v for v in every.facts if v.object and v.object.name == "Lyon")
    assert lyon.fact.invalid_at == moved and lyon.memory_ids == (first.memory.id,)
    assert lyon.fact.invalidated_by is not None
    closer = every.closers[lyon.fact.invalidated_by]
    assert closer.object is not None and closer.object.name == "Marseille"
    assert closer.memory_ids == (second.memory.id,)
    # as of an instant between the two writes: Lyon was in force, Marseille not yet known
    before = graph.entity(ADMIN, anna.entity_id, **USER, as_of=between)
    assert [v.object.name for v in before.facts if v.object] == ["Lyon"]
    assert graph.entity(ADMIN, anna.entity_id, **USER, as_of=T0).facts == []
    # what one memory put in the graph, for its page
    mine = graph.memory_graph(ADMIN, second.memory.id)
    assert {e.name for e in mine.entities} == {"Anna Kowalski", "Marseille"}
    assert [(v.fact.predicate, v.memory_ids) for v in mine.facts] == [
        ("lives_in", (second.memory.id,))
    ]
    # forgotten source: its facts and its only-named entities leave the operator's lists too
    gov = GovernanceService(service)
    gov.oversight_forget(Principal("t1", "key-super", Role.SUPERADMIN), second.memory.id)
    assert "Marseille" not in _names(graph.entities(ADMIN, **USER))
    assert graph.entity(ADMIN, anna.entity_id, **USER).facts == []


def test_ops_4_graph_isolation_roles_and_hostile_input(
    service: MemoryService, graph: GraphInspection
) -> None:
    made = service.remember(AGENT, "Anna Kowalski lives in Lyon.", scope="user").memory
    anna = graph.entities(ADMIN, **USER, prefix="anna").rows[0].entity
    with pytest.raises(Forbidden):
        graph.entities(AGENT, **USER)
    with pytest.raises(Forbidden):
        graph.entity(AGENT, anna.entity_id, **USER)
    for who, where in (
        (OTHER_ADMIN, USER),  # another tenant
        (ADMIN, {"scope": "user", "owner": "u-18"}),  # another subject
        (ADMIN, {"scope": "agent", "owner": "u-17"}),  # another scope
    ):
        with pytest.raises(NotFound):
            graph.entity(who, anna.entity_id, **where)
    with pytest.raises(NotFound):
        graph.entity(ADMIN, "0" * 32, **USER)
    with pytest.raises(NotFound):
        graph.memory_graph(OTHER_ADMIN, made.id)  # another tenant's memory
    for bad in ("", "a\x1fb", "x" * 200, "../etc"):
        with pytest.raises(InvalidInput):
            graph.entities(ADMIN, scope="user", owner=bad)
    for cursor in ("!!", "W10", "WzEsMl0", "x" * 300, "WzE4NDQ2NzQ0MDczNzA5NTUxNjE1LCJhIl0"):
        with pytest.raises(InvalidInput):
            graph.entities(ADMIN, **USER, cursor=cursor)
    for prefix in ("a\x00b", "\ud800", "p" * 300):
        with pytest.raises(InvalidInput):
            graph.entities(ADMIN, **USER, prefix=prefix)
    with pytest.raises(InvalidInput):
        graph.entities(ADMIN, **USER, types=["Not A Type"])
    assert _names(graph.entities(ADMIN, **USER, prefix="%")) == []  # no wildcard
    assert _names(graph.entities(ADMIN, **USER, prefix="_nna")) == []
