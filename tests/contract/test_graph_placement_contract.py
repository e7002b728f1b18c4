"""Placement by ontology on every backend (issue 26, GRAPH-2): a memory and its graph mirror
move to the tenant scope only when every check passes; each check that can refuse keeps them in
the writer's scope; both halves move together or neither does (an exception, and a process
killed between the two writes); every decision is audited with the check that decided it; the
policy is versioned, audited, admin-only and refuses hostile input with stable codes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from quipu.core.placement import GRAPH_TENANT_GRANT
from quipu.core.records import MemoryVersion, Principal, Role
from quipu.core.scopes import TENANT_WRITE_GRANT
from quipu.errors import Conflict, Forbidden, InvalidInput, NotFound, QuipuError
from quipu.graph import placement as placement_module
from quipu.graph.placement import Placement
from quipu.graph.service import GraphService
from quipu.memories import MemoryService
from quipu.storage.base import Store
from quipu.storage.sqlite.store import SQLiteStore

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops", user_id="u-ops")
BOTH = frozenset({TENANT_WRITE_GRANT, GRAPH_TENANT_GRANT})
WRITER = Principal("t1", "key-w", Role.AGENT, agent_id="writer", user_id="u-w", grants=BOTH)
READER = Principal("t1", "key-r", Role.AGENT, agent_id="reader", user_id="u-r")
POLICY = [
    {"type": "service", "scope": "tenant", "names": ["Checkout API", "Billing Service", "Zephyr"]},
    {"type": "organisation", "scope": "writer"},
]
PLACEABLE = "The Checkout API requires two approvals before a deploy."


@pytest.fixture
def placing(service: MemoryService) -> Placement:
    graph = GraphService(service)
    service.graph = graph
    found = Placement(graph)
    service.placement = found
    return found


def _decisions(store: Store) -> list[dict[str, Any]]:
    return [
        {**e.details, "target": e.target_ids[0]}
        for e in store.list_audit("t1", None, 100)
        if e.action == "graph.placement"
    ]


def _where(placing: Placement, memory: MemoryVersion, who: Principal) -> dict[str, Any]:
    """Which scope holds the memory row and which scope's graph names its subject."""
    graph = placing.graph
    return {
        "memory": memory.scope.value,
        "tenant_graph": [
            e.name for e in graph.recall(READER, "Checkout API", scope="tenant").entities
        ],
        "writer_graph": [e.name for e in graph.recall(who, "Checkout API").entities],
    }


def test_graph_2_placed_in_tenant_when_every_check_passes(
    service: MemoryService, placing: Placement
) -> None:
    """GRAPH-2: declared type, consistent typing, not the profile, not isolated, both grants:
    the memory row and its graph mirror land in the tenant scope together, audited."""
    placing.declare(ADMIN, types=POLICY)
    written = service.remember(WRITER, PLACEABLE).memory
    assert (written.scope.value, written.owner) == ("tenant", "t1")
    # another agent of the tenant, holding no grant, reads both halves in the tenant scope
    assert service.get(READER, written.id, scope="tenant").text == PLACEABLE
    seen = placing.graph.recall(READER, "Checkout API", scope="tenant")
    assert [(e.name, e.type) for e in seen.entities] == [("Checkout API", "service")]
    assert placing.graph.recall(WRITER, "Checkout API").entities == []  # nothing left behind
    assert service.list(WRITER).items == []
    [decision] = _decisions(service.store)
    assert decision["placed"] == "tenant" and decision["check"] == "all_passed"
    assert decision["target"] == written.id and decision["policy_version"] == 1


REFUSALS = [
    # (check that refuses, writer, text, remember kwargs, policy isolated ids)
    ("declared_type", WRITER, "Anna works at Siemens.", {}, []),
    ("not_profile", WRITER, "I think the Checkout API is slow today.", {}, []),
    (
        "not_profile",
        Principal("t1", "key-z", Role.AGENT, agent_id="z", user_id="zephyr", grants=BOTH),
        "Zephyr restarts the Checkout API every night.",
        {},
        [],
    ),
    ("not_isolated", WRITER, PLACEABLE, {}, ["u-w"]),
    (
        "memory_grant",
        Principal("t1", "key-g", Role.AGENT, agent_id="g", grants=frozenset({GRAPH_TENANT_GRANT})),
        PLACEABLE,
        {},
        [],
    ),
    (
        "graph_grant",
        Principal("t1", "key-m", Role.AGENT, agent_id="m", grants=frozenset({TENANT_WRITE_GRANT})),
        PLACEABLE,
        {},
        [],
    ),
    ("candidate", WRITER, PLACEABLE, {"status": "candidate"}, []),
]


@pytest.mark.parametrize(("check", "who", "text", "kwargs", "isolated"), REFUSALS)
def test_graph_2_each_check_refuses_and_keeps_both_halves_with_the_writer(
    service: MemoryService,
    placing: Placement,
    check: str,
    who: Principal,
    text: str,
    kwargs: dict[str, Any],
    isolated: list[str],
) -> None:
    """GRAPH-2: any doubt keeps the memory and its graph in the writer's scope, and the audit
    names the check that decided."""
    placing.declare(ADMIN, types=POLICY, isolated=isolated)
    written = service.remember(who, text, **kwargs).memory
    assert written.scope.value == "agent"
    assert service.list(READER, scope="tenant").items == []
    assert placing.graph.recall(READER, "Checkout API Siemens", scope="tenant").entities == []
    if written.status.value == "active":
        assert placing.graph.recall(who, text).entities  # its graph stayed with it
    [decision] = _decisions(service.store)
    assert (decision["placed"], decision["check"]) == ("writer", check)


def test_graph_2_inconsistent_typing_keeps_it_with_the_writer(
    service: MemoryService, placing: Placement
) -> None:
    """GRAPH-2: an entity the writer's scope already knows as another type is not placed."""
    service.remember(WRITER, "Anna works at Siemens.")  # Siemens: an organisation, no policy
    vendor = {"type": "vendor", "scope": "tenant", "names": ["Siemens"]}
    placing.declare(ADMIN, types=[vendor, POLICY[0]])
    written = service.remember(WRITER, "Siemens ships the new boards on Friday.").memory
    assert written.scope.value == "agent"
    [decision] = _decisions(service.store)
    assert decision["check"] == "consistent_typing" and decision["known"] == ["organisation"]
    # the same name declared and never typed otherwise is placed
    other = service.remember(WRITER, "Billing Service needs a second reviewer.").memory
    assert other.scope.value == "tenant"


def test_graph_2_no_policy_is_the_plain_write_and_asked_tenant_stays(
    service: MemoryService, placing: Placement
) -> None:
    """GRAPH-2: with no policy nothing moves and nothing is decided; a write the caller aims at
    the tenant scope is not a placement (audited as the ``candidate`` check)."""
    first = service.remember(WRITER, PLACEABLE).memory
    assert first.scope.value == "agent" and _decisions(service.store) == []
    assert placing.graph.recall(WRITER, "Checkout API").entities
    placing.declare(ADMIN, types=POLICY)
    asked = service.remember(WRITER, "The Billing Service is frozen.", scope="tenant").memory
    assert asked.scope.value == "tenant"
    [decision] = _decisions(service.store)
    assert (decision["placed"], decision["check"]) == ("writer", "candidate")


def test_graph_2_failure_between_the_halves_leaves_neither(
    service: MemoryService, placing: Placement
) -> None:
    """GRAPH-2: both halves move together or neither does: an error after the memory row is
    written and before its graph mirror rolls back the row, the graph and the audit."""
    placing.declare(ADMIN, types=POLICY)

    def boom(point: str) -> None:
        raise RuntimeError(point)

    placement_module.fault = boom
    try:
        with pytest.raises(RuntimeError, match="between_memory_and_graph"):
            service.remember(WRITER, PLACEABLE)
    finally:
        placement_module.fault = None
    assert service.list(READER, scope="tenant").items == []
    assert service.list(WRITER).items == []
    assert placing.graph.recall(READER, "Checkout API", scope="tenant").entities == []
    assert _decisions(service.store) == []
    # the store is healthy after the rollback: the same write succeeds
    assert service.remember(WRITER, PLACEABLE).memory.scope.value == "tenant"


CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from quipu.core.limits import Limits
    from quipu.graph import placement as placement_module
    from quipu.graph.placement import Placement
    from quipu.graph.service import GraphService
    from quipu.memories import MemoryService
    from tests.contract.test_graph_placement_contract import WRITER, PLACEABLE

    backend, target, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if backend == "postgres":
        from quipu.storage.postgres.store import PostgresStore
        store = PostgresStore(target, max_connections=2)
    else:
        from quipu.storage.sqlite.store import SQLiteStore
        store = SQLiteStore(target)
    service = MemoryService(store, None, Limits())
    service.graph = GraphService(service)
    service.placement = Placement(service.graph)

    def die(point):
        marker.write_text(point)  # the memory row is written, uncommitted; its graph is not
        os._exit(17)

    placement_module.fault = die
    service.remember(WRITER, PLACEABLE)
    sys.exit(3)  # never reached
    """
)


def test_graph_2_process_killed_between_the_halves_leaves_neither(
    service: MemoryService, placing: Placement, tmp_path: Path
) -> None:
    """GRAPH-2: a process that dies (``os._exit``) after writing the memory row and before its
    graph mirror commits neither: the store shows no memory, no graph and no decision."""
    placing.declare(ADMIN, types=POLICY)
    store: Any = service.store
    backend = "sqlite" if isinstance(store, SQLiteStore) else "postgres"
    target = store.path if backend == "sqlite" else store.conninfo
    marker = tmp_path / "reached"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "src")])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, backend, target, str(marker)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 17, done.stdout + done.stderr
    assert marker.read_text() == "between_memory_and_graph"
    assert service.list(READER, scope="tenant").items == []
    assert service.list(WRITER).items == []
    assert placing.graph.recall(READER, "Checkout API", scope="tenant").entities == []
    assert placing.graph.recall(WRITER, "Checkout API").entities == []
    assert _decisions(service.store) == []
    assert service.remember(WRITER, PLACEABLE).memory.scope.value == "tenant"


def test_graph_2_policy_is_versioned_audited_and_admin_only(
    service: MemoryService, placing: Placement
) -> None:
    """GRAPH-2: each declaration is a new version (older ones readable), audited; a stale
    expected_version is 409; a non-admin key is 403; any key reads it."""
    assert (
        placing.policy(READER) == placing.policy(READER) and placing.policy(READER)["version"] == 0
    )
    first = placing.declare(ADMIN, types=POLICY, reason="checkout facts are shared")
    second = placing.declare(ADMIN, types=POLICY[:1], isolated=["u-w"], expected_version=1)
    assert (first["version"], second["version"]) == (1, 2)
    assert placing.policy(READER)["isolated"] == ["u-w"]
    assert [t["type"] for t in placing.policy(READER, version=1)["types"]] == [
        "service",
        "organisation",
    ]
    with pytest.raises(NotFound):
        placing.policy(READER, version=9)
    with pytest.raises(Conflict) as stale:
        placing.declare(ADMIN, types=POLICY, expected_version=1)
    assert stale.value.code == "version_conflict" and stale.value.status == 409
    with pytest.raises(Forbidden):
        placing.declare(WRITER, types=POLICY)
    events = [e for e in service.store.list_audit("t1", None, 50) if e.action.endswith("declare")]
    assert [e.target_ids for e in events] == [("v2",), ("v1",)]
    assert events[1].reason == "checkout facts are shared"
    assert events[0].details["isolated"] == ["u-w"]


HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"types": [{"type": "ser/vice", "scope": "tenant"}]}, "invalid_name"),
    ({"types": [{"type": "ser\x00vice", "scope": "tenant"}]}, "invalid_name"),
    ({"types": [{"type": "s" * 500, "scope": "tenant"}]}, "invalid_name"),
    ({"types": [{"type": "Service", "scope": "tenant"}]}, "invalid_name"),
    ({"types": [{"type": "service", "scope": "global"}]}, "invalid_placement"),
    ({"types": [{"type": "service", "names": ["a\x00b"]}]}, "invalid_text"),
    ({"types": [{"type": "service", "names": ["\ud800"]}]}, "invalid_text"),
    ({"types": [{"type": "service", "names": ["x" * 100_000]}]}, "invalid_placement"),
    ({"types": [{"type": "service", "names": ["n"] * 5_000}]}, "invalid_placement"),
    (
        {"types": [{"type": "a", "names": ["X"]}, {"type": "b", "names": ["x"]}]},
        "invalid_placement",
    ),
    ({"types": "service"}, "invalid_placement"),
    ({"types": [{"type": "service", "owner": "t2"}]}, "invalid_placement"),
    ({"isolated": ["u\x1fw"]}, "invalid_placement"),
    ({"expected_version": -1}, "invalid_version"),
    ({"expected_version": True}, "invalid_version"),
]


def test_graph_2_hostile_declarations_are_4xx_with_stable_codes(
    service: MemoryService, placing: Placement
) -> None:
    """GRAPH-2: separators, NUL, surrogates, huge names and lists, unknown fields: 422 with a
    stable code, and nothing stored."""
    for body, code in HOSTILE:
        with pytest.raises(QuipuError) as refused:
            placing.declare(ADMIN, **body)
        assert isinstance(refused.value, InvalidInput) and refused.value.status == 422, body
        assert refused.value.code == code, body
    assert placing.policy(ADMIN)["version"] == 0
