"""Which holds cover an erase (LIFE-4): the tenant's always; a memory hold only its own memory;
a subject hold only its own subject's data. What does *not* cover an erase matters as much as
what does: a hold must never stop an unrelated erase (mutants the hold matrix let live)."""

from __future__ import annotations

from datetime import UTC, datetime

from quipu.core.governance import Hold, HoldKind
from quipu.governance.holds import Reach, covering

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _hold(kind: HoldKind, target: str, *, released: bool = False) -> Hold:
    return Hold(
        "t1",
        f"h-{kind.value}-{target}",
        kind,
        target,
        "litigation",
        "key-admin",
        AT,
        released_at=AT if released else None,
    )


REACH = Reach.of("t1", ["m-alice"], ["u-alice", None])


def test_life_004_each_kind_covers_its_own_target() -> None:
    for hold in (
        _hold(HoldKind.TENANT, "t1"),
        _hold(HoldKind.MEMORY, "m-alice"),
        _hold(HoldKind.SUBJECT, "u-alice"),
    ):
        assert covering([hold], REACH) == [hold]


def test_life_004_a_hold_never_covers_another_target() -> None:
    others = [
        _hold(HoldKind.MEMORY, "m-bob"),
        _hold(HoldKind.SUBJECT, "u-bob"),
        # a target that names the other kind's value covers nothing either
        _hold(HoldKind.SUBJECT, "m-alice"),
        _hold(HoldKind.MEMORY, "u-alice"),
        _hold(HoldKind.TENANT, "t1", released=True),
    ]
    assert covering(others, REACH) == []
    assert REACH.subjects == frozenset({"u-alice"})  # no subject: nothing to hold


def test_life_004_a_reach_cannot_change_after_it_was_checked() -> None:
    import dataclasses

    import pytest

    with pytest.raises(dataclasses.FrozenInstanceError):
        REACH.tenant_id = "t2"  # type: ignore[misc]
