"""Planes in recall and search across planes, on every backend (issue 28, RECALL-8).

Memories of kind ``note`` are the ``notes`` plane, other kinds ``facts``; ``recall`` reads both
by default and ``planes`` narrows it; a plane recall cannot serve is named with
``sources_applied: false``. ``search`` reads every plane of one scope, each row labelled."""

from __future__ import annotations

import pytest

from quipu.core.records import Principal
from quipu.documents import DocumentService
from quipu.errors import InvalidInput
from quipu.kv import KeyValueService
from quipu.memories import MemoryService
from quipu.search import SearchService


@pytest.fixture
def search(service: MemoryService) -> SearchService:
    return SearchService(service, DocumentService(service), KeyValueService(service))


def _seed(search: SearchService, who: Principal) -> None:
    memory = search.memory
    memory.remember(who, "The backup drive is kept in the blue cabinet", kind="fact")
    memory.remember(who, "Note: the blue cabinet key hangs by the door", kind="note")
    search.documents.add(
        who,
        "# Office guide\n\nThe blue cabinet in room 4 holds the backup drive and spare cables.",
        title="Office guide",
    )
    search.kv.set(who, "cabinet/blue", {"room": 4})


def test_recall_008_planes_narrow_recall(search: SearchService, alice: Principal) -> None:
    _seed(search, alice)
    memory = search.memory
    both = memory.recall(alice, "blue cabinet")
    assert {h.memory.kind.value for h in both.results} == {"fact", "note"}
    assert both.meta["sources_applied"] is True and both.meta["planes"] == ["facts", "notes"]
    notes = memory.recall(alice, "blue cabinet", planes=["notes"])
    assert [h.memory.kind.value for h in notes.results] == ["note"]
    facts = memory.recall(alice, "blue cabinet", planes=["facts"])
    assert [h.memory.kind.value for h in facts.results] == ["fact"]
    # a caller's kinds filter is narrowed, never widened, by the planes
    assert memory.recall(alice, "blue cabinet", planes=["facts"], kinds=["note"]).results == []
    # recall cannot serve documents: it says so and names the plane
    mixed = memory.recall(alice, "blue cabinet", planes=["facts", "documents"])
    assert mixed.meta["sources_applied"] is False
    assert mixed.meta["unserved_planes"] == ["documents"]
    assert [h.memory.kind.value for h in mixed.results] == ["fact"]
    only = memory.recall(alice, "blue cabinet", planes=["graph"])
    assert only.results == [] and only.meta["unserved_planes"] == ["graph"]
    for bad in (["facts", "nope"], [], "facts", [1]):
        with pytest.raises(InvalidInput) as exc:
            memory.recall(alice, "x", planes=bad)
        assert exc.value.code == "invalid_plane"


def test_recall_008_search_reads_every_plane(search: SearchService, alice: Principal) -> None:
    _seed(search, alice)
    found = search.search(alice, "where is the backup drive kept?", k=10)
    planes = {row["plane"] for row in found["results"]}
    assert planes == {"facts", "notes", "documents"}
    assert found["meta"]["sources_applied"] is True and found["meta"]["unserved_planes"] == []
    ranks = [row["rank"] for row in found["results"]]
    assert ranks == list(range(1, len(ranks) + 1))
    scores = [row["score"] for row in found["results"]]
    assert scores == sorted(scores, reverse=True)
    document = next(r for r in found["results"] if r["plane"] == "documents")["document"]
    assert document["title"] == "Office guide" and "snippet" in document
    # kv: exact key match only, first
    exact = search.search(alice, "cabinet/blue")
    assert exact["results"][0]["plane"] == "kv"
    assert exact["results"][0]["entry"]["value"] == {"room": 4}
    assert all(r["plane"] != "kv" for r in search.search(alice, "cabinet")["results"])
    narrowed = search.search(alice, "backup drive", planes=["documents"])
    assert {r["plane"] for r in narrowed["results"]} == {"documents"}
    # the graph plane (issue 26) is served when asked for: no entity named, no graph rows
    graph = search.search(alice, "backup drive", planes=["facts", "graph"])
    assert graph["meta"]["sources_applied"] is True and graph["meta"]["unserved_planes"] == []
    assert "graph" in graph["meta"]["planes"]


def test_recall_008_search_is_one_scope_and_isolated(
    search: SearchService, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:
    _seed(search, alice)
    for intruder in (bob, other_tenant):
        assert search.search(intruder, "blue cabinet backup drive")["results"] == []
        assert search.search(intruder, "cabinet/blue")["results"] == []
    assert search.search(alice, "blue cabinet", scope="user")["results"] == []
    with pytest.raises(InvalidInput):
        search.search(alice, "x", scope="nowhere")
    for bad in ("", "\x00", "a\ud800", "x" * 501):
        with pytest.raises(InvalidInput):
            search.search(alice, bad)
    with pytest.raises(InvalidInput):
        search.search(alice, "x", k=0)
