"""Episodes and dated turns through real stores (issue 24; PROMO-1..4, CONSOL-3, CONSOL-4,
MEM-2, MEM-3): a turn keeps the time it was said, promotion keeps the session's words as
``episode`` memories located by turn and offsets, and the promotion key includes the
extractor's version."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.limits import Limits
from quipu.core.records import Kind, Principal, Role, Source, Trust
from quipu.errors import InvalidInput
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.memories import MemoryService

SAID = datetime(2023, 5, 20, 14, 30, tzinfo=UTC)

CHAT = [
    ("user", "I adopted a rescue dog named Biscuit from the shelter yesterday."),
    ("assistant", "Congratulations! For a rescue dog I recommend a crate and a slow feeder."),
    ("user", "ok"),
    ("user", "I spent 70 hours restoring my grandfather's oak desk last year."),
]


class NewerExtractor(DeterministicExtractor):
    """The same rules under a new version: an upgrade of the deterministic extractor."""

    version = DeterministicExtractor.version + "+upgrade"


def _runtime(make_store, local_embedder, extractor=None):  # type: ignore[no-untyped-def]
    s = load_settings({"database": "unused.db"}, environ={})
    service = MemoryService(make_store(), local_embedder, Limits())
    return build_runtime(s, service, extractor=extractor or DeterministicExtractor())


def _import(rt, who: Principal, session: str) -> None:  # type: ignore[no-untyped-def]
    for i, (role, text) in enumerate(CHAT):
        rt.sessions.append(who, session, role, text, observed_at=SAID + timedelta(minutes=i))


def _promoted(rt, who: Principal, kinds: list[str] | None = None) -> list[Any]:  # type: ignore[no-untyped-def]
    return list(
        rt.service.list(who, scope="agent_user", sources=["promoted"], kinds=kinds, limit=200).items
    )


def test_mem_002_turn_keeps_its_observed_at_and_refuses_bad_times(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 24: the session API could not take a turn's real time; imported history was dated
    at append time."""
    rt = _runtime(make_store, local_embedder)
    turn = rt.sessions.append(alice, "s", "user", "hello there", observed_at=SAID.isoformat())
    assert turn.observed_at == SAID and turn.to_dict()["observed_at"] == SAID.isoformat()
    plain = rt.sessions.append(alice, "s", "assistant", "hi")
    read = rt.sessions.history(alice, "s")
    assert [t.said_at for t in read] == [SAID, plain.created_at]
    for bad in (
        "yesterday",
        "2023-02-30T00:00:00",
        17,
        "\ud800",
        datetime.max.isoformat() + "-14:00",
    ):
        with pytest.raises(InvalidInput) as err:
            rt.sessions.append(alice, "s", "user", "x y z", observed_at=bad)
        assert err.value.code == "invalid_time"
    with pytest.raises(InvalidInput) as err:
        rt.sessions.append(
            alice, "s", "user", "x y z", observed_at=datetime.now(UTC) + timedelta(days=1)
        )
    assert err.value.code == "invalid_time"
    assert len(rt.sessions.history(alice, "s")) == 2  # nothing written by a refused append
    rt.close()


def test_consol_003_promotion_writes_dated_episodes_and_facts_with_turn_provenance(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 24: promotion kept no words, ignored assistant turns, left `observed_at` empty,
    resolved "yesterday" against append time, and named no turn in provenance."""
    rt = _runtime(make_store, local_embedder)
    _import(rt, alice, "s1")
    rt.sessions.promote(alice, "s1")
    rt.worker.drain()
    episodes = _promoted(rt, alice, ["episode"])
    contents = {seq: text for seq, (_, text) in enumerate(CHAT, start=1)}
    assert sorted(e.provenance.turn_seq for e in episodes) == [1, 2, 4]  # "ok" carries nothing
    for e in episodes:
        p = e.provenance
        assert e.kind is Kind.EPISODE and e.trust is Trust.UNVERIFIED
        assert e.source is Source.PROMOTED and p.session_id == "s1"
        assert contents[p.turn_seq][p.turn_start : p.turn_end] == e.text
        assert p.turn_role == CHAT[p.turn_seq - 1][0]
        assert e.observed_at == SAID + timedelta(minutes=p.turn_seq - 1)
    assert any(e.provenance.turn_role == "assistant" for e in episodes)
    facts = [m for m in _promoted(rt, alice) if m.kind is not Kind.EPISODE]
    assert facts, "the deterministic extractor found no fact"
    for f in facts:
        assert f.provenance.turn_seq in (1, 4) and f.provenance.turn_role == "user"
        assert CHAT[f.provenance.turn_seq - 1][1][f.provenance.quote_start :].startswith(
            f.provenance.quote
        )
        assert f.observed_at == SAID + timedelta(minutes=f.provenance.turn_seq - 1)
    dog = [f for f in facts if "Biscuit" in f.text]
    assert dog and "2023-05-19" in dog[0].text  # "yesterday" of the turn, not of the append
    rt.close()


def test_consol_004_extractor_upgrade_reruns_an_unchanged_session_once(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """CONSOL-4: the key is the window's hash plus the extractor's version. Before issue 24 an
    upgraded extractor never saw an unchanged session again."""
    rt = _runtime(make_store, local_embedder)
    _import(rt, alice, "s1")
    job, _ = rt.sessions.promote(alice, "s1")
    rt.worker.drain()
    assert rt.queue.store.get_job(job.job_id).result["outcome"] == "promoted"
    before = sorted(m.id for m in _promoted(rt, alice))
    store = rt.service.store
    upgraded = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        MemoryService(store, local_embedder, Limits()),
        extractor=NewerExtractor(),
    )
    outcomes = []
    for _ in range(3):
        job, _ = upgraded.sessions.promote(alice, "s1")
        upgraded.worker.drain()
        outcomes.append(upgraded.queue.store.get_job(job.job_id).result["outcome"])
    assert outcomes == ["promoted", "unchanged", "unchanged"]
    # the re-run wrote nothing twice: same rows, episodes and facts (PROMO-2)
    assert sorted(m.id for m in _promoted(upgraded, alice)) == before
    upgraded.service.close()
    rt.close()


def test_promo_004_episodes_never_supersede_and_are_never_superseded(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """A new promoted fact supersedes a near-duplicate promoted *fact*, never an episode (the
    record of what was said, here an assistant turn saying nearly the same) and never an
    explicit memory."""
    rt = _runtime(make_store, local_embedder)
    explicit = rt.service.remember(alice, "User lives in Porto", scope="agent_user")
    chats = [
        (
            "Hello there, one quick question.",
            "The user works as a senior data engineer at Farfetch now.",
        ),
        ("I live in Porto, by the way.", "Thanks, good to know about Porto."),
        ("I work as a senior data engineer at Farfetch now.", "Congratulations on the new role!"),
    ]
    for n, (said, answered) in enumerate(chats):
        rt.sessions.append(alice, f"s{n}", "user", said)
        rt.sessions.append(alice, f"s{n}", "assistant", answered)
        rt.sessions.promote(alice, f"s{n}")
        rt.worker.drain()
    episodes = _promoted(rt, alice, ["episode"])
    assert len(episodes) == 6 and all(e.status.value == "active" for e in episodes)
    gone = rt.service.list(alice, scope="agent_user", statuses=["superseded"], limit=50).items
    assert all(m.kind is not Kind.EPISODE and m.source is Source.PROMOTED for m in gone)
    assert rt.service.get(alice, explicit.memory.id).status.value == "active"
    rt.close()


def test_mem_002_session_export_and_import_keep_each_turns_observed_at(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Issue 24: a session export wrote the turn's time but the import dropped it (and the
    stores never read it back), so moved history was dated at its append time again."""
    from quipu import portability

    source = _runtime(make_store, local_embedder)
    _import(source, alice, "s1")
    plain = source.sessions.append(alice, "s1", "assistant", "no time given for this one")
    lines = [json.dumps(r) + "\n" for r in portability.export_records(source.service.store, None)]
    turns = [t for r in map(json.loads, lines) if r["type"] == "session" for t in r["turns"]]
    assert [t["observed_at"] for t in turns][:2] == [
        SAID.isoformat(),
        (SAID + timedelta(minutes=1)).isoformat(),
    ]
    target = MemoryService(make_store("target.db"), local_embedder, Limits())
    importer = Principal(alice.tenant_id, "key-import", Role.SUPERADMIN)
    portability.import_records(target, importer, lines)
    moved = _runtime(lambda: target.store, local_embedder)
    read = moved.sessions.history(alice, "s1")
    assert [t.said_at for t in read] == [
        *(SAID + timedelta(minutes=i) for i in range(len(CHAT))),
        plain.created_at,
    ]
    # an append-time turn reads as it did before the move (OPS-2: the same answers)
    assert read[-1].observed_at == source.sessions.history(alice, "s1")[-1].observed_at
    source.close()
    target.close()
