"""Export then import loses nothing (API-4): versions, statuses, times, provenance, vectors."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from quipu import transfer
from quipu.core.limits import Limits
from quipu.core.query import Filters
from quipu.core.records import Principal
from quipu.errors import InvalidInput
from quipu.memories import MemoryService


def _populate(svc: MemoryService, who: Principal) -> None:
    now = datetime.now(UTC)
    a = svc.remember(
        who,
        "Dana prefers window seats",
        kind="preference",
        tags=["travel"],
        aliases=["seat pref"],
        metadata={"n": 1},
        observed_at=now - timedelta(days=3),
        invalid_at=now + timedelta(days=300),
        session_id="s1",
        quote="window",
    ).memory
    svc.revise(who, a.id, "Dana prefers aisle seats", expected_version=1, reason="changed")
    b = svc.remember(who, "Ravi lives in Pune", scope="user").memory
    c = svc.remember(who, "Ravi lives in Mumbai", scope="user").memory
    svc.supersede(who, b.id, c.id, reason="moved")
    d = svc.remember(who, "temporary note").memory
    svc.forget(who, d.id, reason="cleanup")
    svc.remember(who, "no vector for this one", defer_embedding=True)
    svc.remember(who, "Should we book the ferry to Naxos?", session_id="s2")
    svc.remember(who, "Yes, the early one", session_id="s2")


def test_api_004_export_import_round_trip_is_lossless(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    source = MemoryService(make_store("a.db"), local_embedder, Limits())
    _populate(source, alice)
    buffer = io.StringIO()
    written = list(transfer.write(buffer, source.export(alice)))
    target = MemoryService(make_store("b.db"), local_embedder, Limits())
    imported = target.import_(alice, transfer.read(io.StringIO(buffer.getvalue())))
    assert imported == written[-1] == 11  # the supersede stamps the replacing memory (MEM-3)

    def snapshot(svc: MemoryService) -> list[tuple[dict[str, object], bytes | None]]:
        return [
            (m.to_dict(), None if v is None else np.asarray(v).tobytes())
            for m, v in svc.export(alice)
        ]

    assert snapshot(source) == snapshot(target)
    # the imported store behaves the same
    q = "where does Dana sit"
    assert [h.memory.id for h in target.recall(alice, q).results] == [
        h.memory.id for h in source.recall(alice, q).results
    ]
    assert target.store.count_live(_agent(alice)) == source.store.count_live(_agent(alice))
    # context keys survive: the reply is still found by the words of the question before it
    for svc in (source, target):
        found, _ = svc.store.text_candidates(_agent(alice), "ferry Naxos", Filters(), 10)
        assert len(found) == 2
    # importing again adds nothing
    assert target.import_(alice, transfer.read(io.StringIO(buffer.getvalue()))) == 0


def test_api_004_import_refuses_another_tenant_and_garbage(
    make_store, local_embedder, alice: Principal, other_tenant: Principal
) -> None:  # type: ignore[no-untyped-def]
    source = MemoryService(make_store("a.db"), local_embedder, Limits())
    source.remember(alice, "tenant one fact")
    buffer = io.StringIO()
    list(transfer.write(buffer, source.export(alice)))
    target = MemoryService(make_store("b.db"), local_embedder, Limits())
    with pytest.raises(InvalidInput) as err:
        target.import_(other_tenant, transfer.read(io.StringIO(buffer.getvalue())))
    assert err.value.code == "tenant_mismatch"
    assert list(target.export(other_tenant)) == []
    for bad in [
        "",
        "not json\n",
        '{"format": "other"}\n',
        transfer_header() + "[1, 2]\n",
        transfer_header() + '{"type": "version", "id": "x"}\n',
    ]:
        with pytest.raises(InvalidInput) as err:
            target.import_(alice, transfer.read(io.StringIO(bad)))
        assert err.value.code == "invalid_export"


def transfer_header() -> str:
    import json

    return json.dumps(transfer.header()) + "\n"


def _agent(p: Principal):  # type: ignore[no-untyped-def]
    from quipu.core.scopes import resolve_scope

    return resolve_scope(p, "agent")
