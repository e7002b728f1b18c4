"""The key/value plane on every backend (issue 28, KV-1): set, get, list by prefix, history,
delete, as_of, compare-and-set, audit, erase, isolation and hostile input.

Every refusal leaves the store unchanged: the tests read the key back after each one."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from quipu.core.records import Principal, Role
from quipu.errors import Conflict, Forbidden, InvalidInput, LimitExceeded, NotFound, SecretDetected
from quipu.kv import KeyValueService
from quipu.memories import MemoryService

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")


@pytest.fixture
def kv(service: MemoryService) -> KeyValueService:
    return KeyValueService(service)


def test_kv_001_set_get_reads_back_exactly(kv: KeyValueService, alice: Principal) -> None:
    value = {"z": 1, "a": [1.5, "Ünïcode ✓", None, True], "nested": {"b": {"c": "d"}}}
    entry = kv.set(alice, "config/theme", value)
    assert (entry.key, entry.version, entry.status.value) == ("config/theme", 1, "set")
    got = kv.get(alice, "config/theme")
    assert got.value == value
    # exactly as set: key order and text untouched, not re-sorted or normalised
    assert json.dumps(got.value) == json.dumps(value)
    assert got.actor == alice.key_id and got.agent_id == "alice"
    for scalar in ("plain string", 42, -(2**53), 0.1, False, None, [], {}):
        kv.set(alice, "scalar", scalar)
        assert kv.get(alice, "scalar").value == scalar


def test_kv_001_versions_history_and_as_of(kv: KeyValueService, alice: Principal) -> None:
    first = kv.set(alice, "budget", 100)
    time.sleep(0.002)
    between = datetime.now(UTC)
    time.sleep(0.002)
    second = kv.set(alice, "budget", 250, reason="raised")
    assert second.version == 2
    assert kv.get(alice, "budget").value == 250
    assert kv.get(alice, "budget", as_of=between).value == 100
    assert kv.get(alice, "budget", as_of=between.isoformat()).version == 1
    with pytest.raises(NotFound):  # before the key existed
        kv.get(alice, "budget", as_of=first.recorded_at.replace(year=2000))
    history = kv.history(alice, "budget")
    assert [(e.version, e.value, e.reason) for e in history] == [(1, 100, None), (2, 250, "raised")]
    assert history[0].ended_at == second.recorded_at and history[1].ended_at is None
    page = kv.list(alice, as_of=between)
    assert [(e.key, e.value) for e in page.items] == [("budget", 100)]


def test_kv_001_compare_and_set(kv: KeyValueService, alice: Principal) -> None:
    kv.set(alice, "counter", 1, expected_version=0)  # create only
    with pytest.raises(Conflict) as exc:
        kv.set(alice, "counter", 99, expected_version=0)
    assert exc.value.code == "version_conflict" and exc.value.status == 409
    assert exc.value.details["current_version"] == 1
    kv.set(alice, "counter", 2, expected_version=1)
    with pytest.raises(Conflict):
        kv.set(alice, "counter", 99, expected_version=1)  # stale: someone wrote version 2
    assert kv.get(alice, "counter").value == 2
    with pytest.raises(Conflict):
        kv.delete(alice, "counter", expected_version=1)
    assert kv.get(alice, "counter").version == 2
    with pytest.raises(InvalidInput) as bad:
        kv.set(alice, "counter", 3, expected_version=-1)
    assert bad.value.code == "invalid_expected_version"


def test_kv_001_delete_is_logical_and_versioned(kv: KeyValueService, alice: Principal) -> None:
    kv.set(alice, "k", "v1")
    gone = kv.delete(alice, "k", reason="obsolete")
    assert (gone.version, gone.status.value, gone.value) == (2, "deleted", None)
    with pytest.raises(NotFound):
        kv.get(alice, "k")
    with pytest.raises(NotFound):
        kv.delete(alice, "k")
    assert kv.list(alice).items == []
    assert [e.status.value for e in kv.history(alice, "k")] == ["set", "deleted"]
    again = kv.set(alice, "k", "v3", expected_version=0)  # holds no value: 0 matches
    assert again.version == 3 and kv.get(alice, "k").value == "v3"


def test_kv_001_list_by_prefix_with_cursor(kv: KeyValueService, alice: Principal) -> None:
    keys = ["app/a", "app/b", "app/b/c", "app_x", "apq", "other", "app/z"]
    for k in keys:
        kv.set(alice, k, k)
    seen: list[str] = []
    cursor = None
    while True:
        page = kv.list(alice, prefix="app/", cursor=cursor, limit=2)
        seen += [e.key for e in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ["app/a", "app/b", "app/b/c", "app/z"]
    assert [e.key for e in kv.list(alice, prefix="app").items] == sorted(
        k for k in keys if k.startswith("app")
    )
    assert [e.key for e in kv.list(alice).items] == sorted(keys)
    assert kv.list(alice, prefix="zzz").items == []


def test_kv_001_scopes_and_tenants_are_isolated(
    kv: KeyValueService, alice: Principal, bob: Principal, other_tenant: Principal
) -> None:
    kv.set(alice, "secret-plan", "alice's")
    kv.set(alice, "shared", "user scope", scope="user")
    for intruder in (bob, other_tenant):
        with pytest.raises(NotFound) as exc:
            kv.get(intruder, "secret-plan")
        assert exc.value.code == "not_found"
        with pytest.raises(NotFound):
            kv.history(intruder, "secret-plan")
        with pytest.raises(NotFound):
            kv.delete(intruder, "secret-plan")
        assert kv.list(intruder).items == []
    # other_tenant has the same agent and user ids as alice, in another tenant
    assert kv.list(other_tenant, scope="user").items == []
    # the agent scope and the user scope are different partitions
    with pytest.raises(NotFound):
        kv.get(alice, "shared")
    assert kv.get(alice, "shared", scope="user").value == "user scope"
    with pytest.raises(Forbidden) as denied:
        kv.set(alice, "policy", 1, scope="tenant")
    assert denied.value.code == "scope_forbidden"


def test_kv_001_writes_are_audited_without_the_value(
    kv: KeyValueService, service: MemoryService, alice: Principal
) -> None:
    kv.set(alice, "audited", {"note": "zebra-quartz"}, reason="first")
    kv.delete(alice, "audited")
    events = service.store.list_audit("t1", None, 50)
    mine = [e for e in events if e.target_ids == ("audited",)]
    assert [e.action for e in mine] == ["kv.delete", "kv.set"]
    assert mine[1].reason == "first" and mine[1].details == {"scope": "agent", "version": 1}
    assert "zebra-quartz" not in json.dumps([e.to_dict() for e in events])


def test_kv_001_erase_wipes_every_version(
    kv: KeyValueService, service: MemoryService, alice: Principal
) -> None:
    kv.set(alice, "pii", "Quillon lives at 4 Elm Street", reason="quillon reason")
    kv.set(alice, "pii", "Quillon moved to 9 Oak Lane")
    with pytest.raises(Forbidden):
        kv.erase(alice, "pii", reason="not allowed")
    eraser = Principal(
        "t1", "key-dpo", Role.AGENT, agent_id="alice", grants=frozenset({"memory:erase"})
    )
    with pytest.raises(InvalidInput) as why:
        kv.erase(eraser, "pii", reason=" ")
    assert why.value.code == "reason_required"
    done = kv.erase(eraser, "pii", reason="GDPR request 7")
    assert done["versions_erased"] == 2
    with pytest.raises(NotFound):
        kv.get(alice, "pii")
    assert all(e.value is None and e.reason is None for e in kv.history(alice, "pii"))
    with pytest.raises(Conflict) as exc:
        kv.set(alice, "pii", "again")
    assert exc.value.code == "erased"
    audit = json.dumps([e.to_dict() for e in service.store.list_audit("t1", None, 50)])
    assert "Quillon" not in audit and "quillon reason" not in audit
    assert "GDPR request 7" in audit
    with pytest.raises(NotFound):
        kv.erase(eraser, "never-set", reason="r")


@pytest.mark.parametrize(
    "value",
    [
        {"password": "hunter2hunter2"},
        {"id": "AKIAIOSFODNN7EXAMPLE"},
        [{"id": "AKIAIOSFODNN7EXAMPLE"}],  # under a machine-field name, inside a list
        ["ok", {"deep": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}],
        "token sk-ant-api03-" + "x" * 40,
    ],
)
def test_kv_001_safe_001_secret_values_refused(
    kv: KeyValueService, alice: Principal, value: Any
) -> None:
    with pytest.raises(SecretDetected) as exc:
        kv.set(alice, "creds", value)
    assert exc.value.code == "secret_detected"
    with pytest.raises(NotFound):
        kv.get(alice, "creds")


def test_kv_001_secret_in_key_or_reason_refused(kv: KeyValueService, alice: Principal) -> None:
    with pytest.raises(SecretDetected):
        kv.set(alice, "AKIAIOSFODNN7EXAMPLE", 1)
    with pytest.raises(SecretDetected):
        kv.set(alice, "k", 1, reason="rotated to AKIAIOSFODNN7EXAMPLE")
    assert kv.list(alice).items == []


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a\x00b",
        "a\ud800",
        "a b",
        "a\nb",
        "a\x1fb",
        "/leading",
        "trailing/",
        "a//b",
        "../etc/passwd",
        "a/../b",
        ".hidden",
        "naïve",
        "a?b",
        "a#b",
        "a%2Fb",
        "x" * 257,
        42,
        None,
        ["a"],
    ],
)
def test_kv_001_hostile_keys_refused(kv: KeyValueService, alice: Principal, key: Any) -> None:
    with pytest.raises(InvalidInput) as exc:
        kv.set(alice, key, 1)
    assert exc.value.code == "invalid_key"
    with pytest.raises(InvalidInput):
        kv.get(alice, key)
    assert kv.list(alice).items == []


def test_kv_001_key_charset_accepted(kv: KeyValueService, alice: Principal) -> None:
    for key in ("a", "_", "user:42/prefs.theme", "A-Z_0.9:@+=~-", "x" * 256, "a/b/c/d"):
        kv.set(alice, key, key)
        assert kv.get(alice, key).value == key


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("nul \x00 inside", "invalid_value"),
        ("lone \ud800 surrogate", "invalid_value"),
        ({"k\ud800": 1}, "invalid_value"),
        ({"k\x00": 1}, "invalid_value"),
        (_deep(9), "invalid_value"),
        (_deep(100_000), "invalid_value"),
        (2**53 + 1, "invalid_value"),
        (10**400, "invalid_value"),
        (float("nan"), "invalid_value"),
        (float("inf"), "invalid_value"),
        ({str(i): i for i in range(300)}, "invalid_value"),
        ({1: "non-string key"}, "invalid_value"),
        ({"blob": "x" * 20_000}, "value_too_large"),
        ({"set"}, "invalid_value"),
        (b"bytes", "invalid_value"),
    ],
)
def test_kv_001_hostile_values_refused(
    kv: KeyValueService, alice: Principal, value: Any, code: str
) -> None:
    kv.set(alice, "target", "before")
    with pytest.raises(InvalidInput) as exc:
        kv.set(alice, "target", value)
    assert exc.value.code == code and exc.value.status == 422
    assert kv.get(alice, "target").value == "before"
    assert len(kv.history(alice, "target")) == 1


def test_kv_001_bounds_on_reads(kv: KeyValueService, alice: Principal) -> None:
    with pytest.raises(InvalidInput) as exc:
        kv.list(alice, prefix="a b")
    assert exc.value.code == "invalid_key"
    with pytest.raises(InvalidInput):
        kv.list(alice, cursor="../x")
    with pytest.raises(InvalidInput):
        kv.list(alice, limit=0)
    with pytest.raises(InvalidInput):
        kv.get(alice, "k", as_of="not a time")
    with pytest.raises(InvalidInput):
        kv.set(alice, "k", 1, reason="x" * 1001)


def test_kv_001_quota_counts_keys_holding_values(service: MemoryService, alice: Principal) -> None:
    from dataclasses import replace

    service.limits = replace(service.limits, quota_per_owner=2)
    kv = KeyValueService(service)
    kv.set(alice, "a", 1)
    kv.set(alice, "b", 1)
    kv.set(alice, "b", 2)  # a new version of a live key is not a new key
    with pytest.raises(LimitExceeded) as exc:
        kv.set(alice, "c", 1)
    assert exc.value.code == "quota_exceeded"
    kv.delete(alice, "a")
    kv.set(alice, "c", 1)
    assert [e.key for e in kv.list(alice).items] == ["b", "c"]


def test_kv_001_admin_writes_tenant_scope(
    kv: KeyValueService, alice: Principal, other_tenant: Principal
) -> None:
    kv.set(ADMIN, "policy/retention-days", 30, scope="tenant")
    assert kv.get(alice, "policy/retention-days", scope="tenant").value == 30
    with pytest.raises(NotFound):
        kv.get(other_tenant, "policy/retention-days", scope="tenant")


def test_kv_001_concurrent_compare_and_set_has_one_winner(
    kv: KeyValueService, alice: Principal
) -> None:
    """Eight writers race to create the same key and then to replace version 1: exactly one of
    each race wins; every loser gets 409 version_conflict and writes nothing."""
    from concurrent.futures import ThreadPoolExecutor

    def attempt(expected: int, value: int) -> str:
        try:
            kv.set(alice, "race", value, expected_version=expected)
        except Conflict as exc:
            return exc.code
        return "won"

    for expected in (0, 1):
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(lambda v, e=expected: attempt(e, v), range(8)))
        assert outcomes.count("won") == 1, outcomes
        assert set(outcomes) == {"won", "version_conflict"}
    assert [e.version for e in kv.history(alice, "race")] == [1, 2]
