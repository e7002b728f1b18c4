"""Versioned, reversible entity merges on every backend (issue 26, GRAPH-1): a merge is a new
version of the kept entity with the other's facts and mentions re-pointed; a revert restores
both; history keeps every version; both are audited; hostile ids are a clear 4xx."""

from __future__ import annotations

import pytest

from quipu.core.records import Principal, Role
from quipu.errors import Conflict, InvalidInput, NotFound
from quipu.governance import GovernanceService
from quipu.graph.merges import GraphMerges
from quipu.graph.service import GraphService
from quipu.memories import MemoryService

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="alice", user_id="u-alice")


def _ids(graph: GraphService, who: Principal, *names: str) -> list[str]:
    return [graph.facts(who, n).entities[0].entity_id for n in names]


def _facts(graph: GraphService, who: Principal, subject: str) -> list[str]:
    try:
        answer = graph.facts(who, subject)
    except NotFound:
        return []
    return sorted(
        f"{f.fact.predicate}:{f.object.name if f.object else f.fact.value}" for f in answer.facts
    )


def test_graph_001_merge_is_a_new_version_and_revert_restores_it(
    service: MemoryService, alice: Principal
) -> None:
    graph = GraphService(service)
    service.graph = graph
    m1 = service.remember(alice, "Katherine works at Siemens.").memory
    m2 = service.remember(alice, "Kasia lives in Warsaw.").memory
    kath, kasia = _ids(graph, alice, "Katherine", "Kasia")
    merges = GraphMerges(graph)
    done = merges.merge(alice, kath, kasia, reason="Kasia is Katherine's nickname")
    assert done["version"] == 2 and done["merged_id"] == kasia
    assert done["entity"]["aliases"] == ["Kasia"]
    # the merged entity's facts and mentions now name the kept one; Kasia resolves to it
    assert _facts(graph, alice, "Katherine") == ["lives_in:Warsaw", "works_at:Siemens"]
    assert _facts(graph, alice, "Kasia") == ["lives_in:Warsaw", "works_at:Siemens"]
    assert set(graph.facts(alice, kath).memory_ids) == {m1.id, m2.id}
    assert [e.entity_id for e in graph.recall(alice, "Kasia", hops=0).entities] == [kath]
    old = merges.history(alice, kath)["versions"]
    assert [(v["version"], v["aliases"], v["ended_by"]) for v in old] == [(1, [], "merge")]
    # a new memory naming Kasia lands on the kept entity
    service.remember(alice, "Kasia is dating Tomek.")
    assert "is_dating:Tomek" in _facts(graph, alice, "Katherine")
    back = merges.revert(alice, done["merge_id"], reason="two people after all")
    assert back["restored"]["entity_id"] == kasia and back["entity"]["aliases"] == []
    assert _facts(graph, alice, "Katherine") == ["is_dating:Tomek", "works_at:Siemens"]
    assert _facts(graph, alice, kasia) == ["lives_in:Warsaw"]
    assert [v["ended_by"] for v in merges.history(alice, kath)["versions"]] == [
        "merge",
        "revert",
    ]
    with pytest.raises(Conflict) as again:
        merges.revert(alice, done["merge_id"])
    assert again.value.code == "merge_reverted"
    actions = [e.action for e in service.store.list_audit("t1", None, 50)]
    assert "graph.merge" in actions and "graph.merge_revert" in actions


def test_graph_001_merge_stays_in_its_scope_and_refuses_hostile_ids(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    graph = GraphService(service)
    service.graph = graph
    service.remember(alice, "Lena works at Nokia.")
    service.remember(bob, "Lena works at Ericsson.")
    service.remember(alice, "Lars lives in Malmo.")
    lena_a, lars = _ids(graph, alice, "Lena", "Lars")
    (lena_b,) = _ids(graph, bob, "Lena")
    merges = GraphMerges(graph)
    with pytest.raises(NotFound):  # another agent's entity is not in alice's scope
        merges.merge(alice, lena_a, lena_b)
    with pytest.raises(NotFound):
        merges.revert(alice, "0" * 32)
    for bad in ("", "a/b", "x\x00y", "\ud800", "a" * 500, 7, None, ["a"]):
        with pytest.raises(InvalidInput) as err:
            merges.merge(alice, lena_a, bad)
        assert err.value.code == "invalid_id"
    with pytest.raises(InvalidInput) as same:
        merges.merge(alice, lars, lars)
    assert same.value.code == "invalid_merge"
    # a later merge into the kept entity must be reverted first
    first = merges.merge(alice, lena_a, lars)
    service.remember(alice, "Lotta lives in Lund.")
    (lotta,) = _ids(graph, alice, "Lotta")
    merges.merge(alice, lena_a, lotta)
    with pytest.raises(Conflict) as later:
        merges.revert(alice, first["merge_id"])
    assert later.value.code == "merge_conflict"
    assert _facts(graph, bob, "Lena") == ["works_at:Ericsson"]


def test_graph_001_erase_takes_a_merged_entity_s_history_with_it(
    service: MemoryService, alice: Principal
) -> None:
    """LIFE-4 with GRAPH-1: erasing the only memories naming merged entities removes their
    old versions and merge records (they hold names read from the erased text)."""
    graph = GraphService(service)
    service.graph = graph
    m = service.remember(alice, "Quentin works at Valeo. Quinn lives in Nantes.").memory
    quentin, quinn = _ids(graph, alice, "Quentin", "Quinn")
    merges = GraphMerges(graph)
    merges.merge(alice, quentin, quinn)
    assert len(merges.history(alice, quentin)["versions"]) == 1
    GovernanceService(service).erase(ADMIN, m.id, reason="subject request")
    assert merges.history(alice, quentin)["versions"] == []
    with pytest.raises(NotFound):
        graph.facts(alice, "Quentin")
