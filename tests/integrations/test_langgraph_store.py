"""``QuipuStore``, LangGraph's ``BaseStore`` over Quipu (issue 27, API-1), run against the real
``langgraph`` package. LangGraph ships no store conformance suite on PyPI (its
``langgraph-checkpoint-conformance`` covers checkpointers only), so this suite follows the
interface as LangGraph documents it and as its own store tests exercise it
(libs/checkpoint/tests/test_store.py: namespaces, wildcards, depth, pagination, filters,
async), on a real SQLite file with the bundled model, and once over HTTP with run tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    PutOp,
    SearchItem,
    SearchOp,
)

import quipu
from quipu.composition import load_settings
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import InvalidInput, SecretDetected
from quipu.integrations.langgraph import QuipuStore
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer


@pytest.fixture
def mem(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[quipu.Quipu]:
    with quipu.open(tmp_path / "lg.db", embedder=local_embedder, worker_embedded=False) as m:
        yield m


@pytest.fixture
def store(mem: quipu.Quipu) -> QuipuStore:
    return QuipuStore(mem, scopes={"users": "user"})


def test_api_001_it_is_a_langgraph_store(store: QuipuStore) -> None:
    assert isinstance(store, BaseStore) and store.supports_ttl is False


def test_api_001_put_get_overwrite_delete(store: QuipuStore, mem: quipu.Quipu) -> None:
    ns = ("docs", "team-a")
    assert store.get(ns, "missing") is None
    store.put(ns, "k1", {"text": "The release train leaves on Thursdays", "n": 1})
    first = store.get(ns, "k1")
    assert isinstance(first, Item)
    assert (first.namespace, first.key, first.value) == (
        ns,
        "k1",
        {"text": "The release train leaves on Thursdays", "n": 1},
    )
    assert first.created_at == first.updated_at

    store.put(ns, "k1", {"text": "The release train leaves on Fridays", "n": 2})
    second = store.get(ns, "k1")
    assert second is not None and second.value["n"] == 2
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    # Quipu keeps what the overwrite replaced: the old memory is superseded by the new one.
    (old,) = [m for m in mem.list(scope="agent", statuses=["superseded"]).items]
    assert "Thursdays" in old.text and old.related_id is not None
    assert mem.get(old.related_id).metadata["langgraph"]["value"]["n"] == 2

    store.put(ns, "k1", {"text": "The release train leaves on Fridays", "n": 2})  # same value
    assert store.get(ns, "k1") == second  # nothing new written

    store.delete(ns, "k1")
    assert store.get(ns, "k1") is None
    assert store.search(ns) == []
    store.delete(ns, "k1")  # deleting again is a no-op, as in LangGraph


def test_api_001_same_value_under_two_keys_stays_two_items(store: QuipuStore) -> None:
    """Quipu keeps one live copy of a text per scope (MEM-6); two LangGraph keys holding the
    same value must not collapse into one item."""
    ns = ("notes",)
    store.put(ns, "a", {"text": "Water the plants"})
    store.put(ns, "b", {"text": "Water the plants"})
    got_a, got_b = store.get(ns, "a"), store.get(ns, "b")
    assert got_a is not None and got_b is not None
    assert (got_a.key, got_b.key) == ("a", "b")
    assert {i.key for i in store.search(ns)} == {"a", "b"}
    store.delete(ns, "a")
    assert store.get(ns, "a") is None and store.get(ns, "b") is not None


def test_api_001_namespaces_are_validated(store: QuipuStore) -> None:
    for bad in [(), ("langgraph", "x"), ("a.b",), ("",)]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a", "b.c"), "k", {"v": 1})])  # straight to batch, too
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {"v": 1})])


def test_api_001_no_ttls_and_hostile_values_get_clear_errors(store: QuipuStore) -> None:
    with pytest.raises(NotImplementedError):
        store.put(("a",), "k", {"v": 1}, ttl=5)
    with pytest.raises(NotImplementedError):
        store.batch([PutOp(("a",), "k", {"v": 1}, ttl=5)])
    with pytest.raises(SecretDetected):
        store.put(("a",), "k", {"note": "the deploy password = hunter2hunter2"})
    with pytest.raises(InvalidInput):
        store.put(("a",), "k", {"text": "lone \ud800 surrogate"})
    with pytest.raises(InvalidInput):
        store.put(("a",), "k", {"blob": "x" * 40_000})  # over max_metadata_bytes
    assert store.search(("a",)) == []  # nothing half-written
    odd_key = "a/b?c#d\x1fe é 🙂"
    store.put(("ünï", "çødé"), odd_key, {"text": "Unicode keys and labels round-trip"})
    got = store.get(("ünï", "çødé"), odd_key)
    assert got is not None and got.key == odd_key and got.namespace == ("ünï", "çødé")


NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


def test_api_001_list_namespaces(store: QuipuStore, mem: quipu.Quipu) -> None:
    for i, ns in enumerate(NAMESPACES):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    # ("users", ...) lives in Quipu's user scope, the rest in agent: both are listed.
    assert len(mem.list(scope="user").items) == 2 and len(mem.list(scope="agent").items) == 7
    assert sorted(store.list_namespaces()) == sorted(NAMESPACES)
    assert store.list_namespaces(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(max_depth=1) == [("a",), ("admin",), ("b",), ("users",)]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456", "settings"),
    ]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_api_001_list_namespaces_pages(store: QuipuStore) -> None:
    store.batch([PutOp(("ns", f"sub_{i:02d}"), f"id_{i}", {"i": i}) for i in range(12)])
    assert store.list_namespaces(prefix=("ns",), limit=5) == [
        ("ns", f"sub_{i:02d}") for i in range(5)
    ]
    assert store.list_namespaces(prefix=("ns",), limit=5, offset=10) == [
        ("ns", "sub_10"),
        ("ns", "sub_11"),
    ]


def test_api_001_search_lists_filters_and_pages(store: QuipuStore) -> None:
    ns = ("shop", "items")
    values = [
        {"name": "red apple", "color": "red", "price": 1.5, "tags": ["fruit"], "meta": {"v": 1}},
        {"name": "green pear", "color": "green", "price": 2.5, "tags": ["fruit"], "meta": {"v": 2}},
        {"name": "red brick", "color": "red", "price": 9.0, "tags": ["stone"], "meta": {"v": 1}},
    ]
    for i, value in enumerate(values):
        store.put(ns, f"i{i}", value)
    store.put(("shop", "itemsX"), "other", {"name": "red herring", "color": "red", "price": 1.0})
    store.put(("elsewhere",), "x", {"name": "red car", "color": "red", "price": 5.0})

    listed = store.search(ns)
    assert [i.key for i in listed] == ["i2", "i1", "i0"]  # newest first, prefix exact by label
    assert all(isinstance(i, SearchItem) and i.score is None for i in listed)
    assert [i.key for i in store.search(ns, filter={"color": "red"})] == ["i2", "i0"]
    assert [i.key for i in store.search(ns, filter={"price": {"$gt": 2}})] == ["i2", "i1"]
    assert [i.key for i in store.search(ns, filter={"price": {"$gte": 1.5, "$lt": 9}})] == [
        "i1",
        "i0",
    ]
    assert [i.key for i in store.search(ns, filter={"color": {"$ne": "red"}})] == ["i1"]
    assert [i.key for i in store.search(ns, filter={"meta": {"v": 1}})] == ["i2", "i0"]
    assert [i.key for i in store.search(ns, filter={"tags": ["fruit"]})] == ["i1", "i0"]
    assert [i.key for i in store.search(ns, filter={"price": {"$lte": "x"}})] == []
    assert [i.key for i in store.search(ns, limit=1, offset=1)] == ["i1"]
    assert store.search(ns, offset=5) == []
    assert {i.key for i in store.search(("shop",))} == {"i0", "i1", "i2", "other"}
    assert {i.key for i in store.search(())} == {"i0", "i1", "i2", "other", "x"}
    with pytest.raises(ValueError):
        store.search(ns, filter={"price": {"$near": 1}})


def test_api_001_search_with_a_query_is_quipu_recall(store: QuipuStore) -> None:
    ns = ("users", "u-1", "memories")
    store.put(ns, "seat", {"text": "Prefers a window seat on long flights"})
    store.put(ns, "food", {"text": "Is vegetarian and avoids mushrooms", "kind": "diet"})
    store.put(ns, "pet", {"text": "Has a cat called Miso", "kind": "pets"})
    store.put(("users", "u-2", "memories"), "seat", {"text": "Prefers an aisle seat on flights"})

    hits = store.search(ns, query="where does the user like to sit on a plane?")
    assert hits[0].key == "seat" and hits[0].namespace == ns
    assert all(i.score is not None for i in hits)
    assert [h.score for h in hits] == sorted((h.score or 0 for h in hits), reverse=True)
    assert all(h.namespace == ns for h in hits)  # u-2's memory is in another namespace
    diet = store.search(ns, query="what should I cook for them?", filter={"kind": "diet"})
    assert [h.key for h in diet] == ["food"]
    assert len(store.search(ns, query="flights", limit=1)) == 1
    long_query = "seat " * 400  # longer than Quipu's query bound: cut, not refused
    assert store.search(ns, query=long_query)[0].key == "seat"
    everyone = store.search(("users",), query="seat on flights")
    assert {(h.namespace[1], h.key) for h in everyone[:2]} == {("u-1", "seat"), ("u-2", "seat")}


def test_api_001_index_fields_choose_the_indexed_text(mem: quipu.Quipu) -> None:
    store = QuipuStore(mem, fields=["summary"])
    store.put(("kb",), "a", {"summary": "Invoices are paid within 30 days", "body": "zebra"})
    store.put(("kb",), "b", {"title": "other"}, index=["title"])
    store.put(("kb",), "c", {"summary": "unindexed"}, index=False)
    texts = {m.metadata["langgraph"]["key"]: m.text for m in mem.list().items}
    assert texts["a"] == "Invoices are paid within 30 days"
    assert texts["b"] == "other"
    assert texts["c"] == '{"summary": "unindexed"}'  # no field text: the value as JSON
    assert store.search(("kb",), query="when are invoices paid")[0].key == "a"


def test_api_001_batch_runs_in_order(store: QuipuStore) -> None:
    results = store.batch(
        [
            PutOp(("b",), "k", {"v": 1}),
            GetOp(("b",), "k"),
            PutOp(("b",), "k", None),
            GetOp(("b",), "k"),
            SearchOp(("b",)),
        ]
    )
    assert results[0] is None and results[2] is None
    first = results[1]
    assert isinstance(first, Item) and first.value == {"v": 1}
    assert results[3] is None and results[4] == []


def test_api_001_async_interface(store: QuipuStore) -> None:
    async def main() -> None:
        ns = ("async", "x")
        await asyncio.gather(
            *(store.aput(ns, f"k{i}", {"text": f"note number {i}"}) for i in range(4))
        )
        got = await asyncio.gather(*(store.aget(ns, f"k{i}") for i in range(4)))
        assert [g.value["text"] if g else None for g in got] == [
            f"note number {i}" for i in range(4)
        ]
        assert len(await store.asearch(ns, limit=10)) == 4
        assert (await store.asearch(ns, query="note number 2"))[0].key == "k2"
        assert await store.alist_namespaces(prefix=("async",)) == [ns]
        await store.adelete(ns, "k0")
        assert await store.aget(ns, "k0") is None

    asyncio.run(main())


def test_scope_002_store_over_http_per_subject(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """The same store over ``quipu.Client``: a service key gives each end user its own run
    token (``for_subject``), so the same namespace holds different items per subject."""
    settings = load_settings({"database": str(tmp_path / "srv.db"), "auth": True}, environ={})
    app, runtime = build_server(settings, local_embedder)
    access = app.state.access
    access.create_tenant("t")
    _, service_key = access.create_key("t", "service")
    server = LiveServer(app)
    try:
        with quipu.Client(server.url, service_key) as service:
            alice = QuipuStore(
                service.for_subject(agent_id="helper", user_id="alice"), scope="agent_user"
            )
            bob = QuipuStore(
                service.for_subject(agent_id="helper", user_id="bob"), scope="agent_user"
            )
            alice.put(("prefs",), "seat", {"text": "Alice prefers window seats"})
            bob.put(("prefs",), "seat", {"text": "Bob prefers aisle seats"})
            a, b = alice.get(("prefs",), "seat"), bob.get(("prefs",), "seat")
            assert a is not None and b is not None
            assert (a.value["text"], b.value["text"]) == (
                "Alice prefers window seats",
                "Bob prefers aisle seats",
            )
            assert [h.value["text"] for h in alice.search(("prefs",), query="seat")] == [
                "Alice prefers window seats"
            ]
            alice.delete(("prefs",), "seat")
            assert alice.get(("prefs",), "seat") is None and bob.get(("prefs",), "seat") is not None
    finally:
        server.close()
        runtime.close()
