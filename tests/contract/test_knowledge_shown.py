"""The merged-recall "already shown in this session" set is durable and shared (issue 25,
RECALL-9 diversity): kept in the store (``knowledge_shown``, keyed tenant, subject, session,
article), so two service instances over one store — two workers, two processes — see each
other's rows; a caller's subject and tenant lead the key, so no other agent or tenant can
suppress its rows; session ids over 200 bytes are 422; rows expire and the prune job deletes
them; an article's erase and a subject erasure reach them (LIFE-4)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from quipu.composition import build_runtime, load_settings
from quipu.core.knowledge import SHOWN_TTL
from quipu.core.limits import Limits
from quipu.core.records import Principal, Role
from quipu.errors import InvalidInput
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.recall_context import MergedRecall

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
ADMIN_T2 = Principal("t2", "key-admin-2", Role.ADMIN, agent_id="ops")
QUERY = "rotate staging credentials"
ASK = {"k": 2, "scopes": ["agent"], "session_id": "s-1"}
BODIES = (
    "Rotate the staging database credentials with the vault CLI every month.",
    "Staging API keys are rotated by the platform team after each incident.",
    "Credentials for the staging bucket rotate automatically at midnight.",
    "When rotating staging SSH credentials, update the bastion allow-list.",
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def pair(make_store, local_embedder) -> Iterator[tuple[MergedRecall, MergedRecall, Clock]]:  # type: ignore[no-untyped-def]
    """Two services, each with its own store object, over one database (two workers)."""
    clock = Clock()
    made = []
    for _ in range(2):
        service = MemoryService(make_store("shared.db"), local_embedder, Limits())
        made.append(MergedRecall(KnowledgeService(service), clock=clock))
    kb = made[0].knowledge
    kb.near_duplicate = 1.01  # four published runbooks, not one and three drafts
    for tenant_admin in (ADMIN, ADMIN_T2):
        for n, body in enumerate(BODIES):
            kb.create(tenant_admin, f"Runbook {n}", body)
    yield made[0], made[1], clock
    for m in made:
        m.close()


def _ids(merged: MergedRecall, who: Principal, **ask: object) -> set[str]:
    return {r["id"] for r in merged.recall_context(who, QUERY, **{**ASK, **ask}).results}


def test_recall_009_two_services_over_one_store_share_the_shown_set(
    pair: tuple[MergedRecall, MergedRecall, Clock], alice: Principal, bob: Principal
) -> None:
    one, two, _ = pair
    first = _ids(one, alice)
    out = two.recall_context(alice, QUERY, **ASK)  # type: ignore[arg-type]
    second = {r["id"] for r in out.results}
    assert len(first) == len(second) == 2 and not first & second
    assert out.meta["diversity"]["dropped_already_seen"] == 2
    assert one.store.shown_get("t1", "alice", "s-1", datetime(2000, 1, 1, tzinfo=UTC), 50) == (
        first | second
    )
    # the subject and tenant lead the key: another agent, or an agent of the same name in
    # another tenant, using the same session token is not suppressed
    assert _ids(two, bob) == first
    foreign = Principal("t2", "key-eve", Role.AGENT, agent_id="alice", user_id="u-alice")
    t2_first = _ids(one, foreign)
    assert len(t2_first) == 2 and not t2_first & (first | second)  # t2's own articles
    # a third call by alice on either service: the pool is exhausted, repeats come back
    third = one.recall_context(alice, QUERY, **ASK)  # type: ignore[arg-type]
    assert len(third.results) == 2 and third.meta["diversity"]["readmitted_already_seen"] >= 1


def test_recall_009_session_id_over_200_bytes_is_422_and_stores_nothing(
    pair: tuple[MergedRecall, MergedRecall, Clock], alice: Principal
) -> None:
    one, _, _ = pair
    for bad in ("s" * 201, "é" * 101, "a\x00b", "x\ud800"):
        with pytest.raises(InvalidInput) as refused:
            one.recall_context(alice, QUERY, **{**ASK, "session_id": bad})  # type: ignore[arg-type]
        assert refused.value.code == "invalid_session_id"
    longest = "s" * 200
    shown = _ids(one, alice, session_id=longest)
    since = datetime(2000, 1, 1, tzinfo=UTC)
    assert one.store.shown_get("t1", "alice", longest, since, 50) == shown
    assert not one.store.shown_get("t1", "alice", "s" * 199, since, 50)  # never a prefix


def test_recall_009_shown_rows_expire_and_the_prune_job_deletes_them(
    pair: tuple[MergedRecall, MergedRecall, Clock], alice: Principal
) -> None:
    one, two, clock = pair
    first = _ids(one, alice)
    clock.now += SHOWN_TTL + timedelta(seconds=1)
    assert _ids(two, alice) == first  # past its time a row suppresses nothing
    since = datetime(2000, 1, 1, tzinfo=UTC)
    assert one.store.shown_get("t1", "alice", "s-1", since, 50) == first  # refreshed
    assert one.store.shown_expire(clock.now - SHOWN_TTL) == 0  # all fresh again
    clock.now += SHOWN_TTL
    assert one.store.shown_expire(clock.now - SHOWN_TTL) == 2
    assert not one.store.shown_get("t1", "alice", "s-1", since, 50)
    # the periodic prune job does it on its own (real time: rows two TTLs old go)
    old = datetime.now(UTC) - 2 * SHOWN_TTL
    one.store.shown_add("t1", "alice", "s-old", None, sorted(first), old)
    one.store.shown_add("t1", "alice", "s-new", None, sorted(first), datetime.now(UTC))
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        one.memories,
        extractor=DeterministicExtractor(),
    )
    assert rt.worker.schedule() >= 1
    rt.worker.drain()
    assert not one.store.shown_get("t1", "alice", "s-old", since, 50)
    assert one.store.shown_get("t1", "alice", "s-new", since, 50) == first


def test_life_004_erasing_an_article_or_a_subject_reaches_the_shown_rows(
    pair: tuple[MergedRecall, MergedRecall, Clock], alice: Principal, bob: Principal
) -> None:
    one, two, _ = pair
    since = datetime(2000, 1, 1, tzinfo=UTC)
    first = _ids(one, alice)
    assert _ids(two, bob) == first
    gone = min(first)
    assert two.knowledge.erase(ADMIN, gone, reason="retired runbook")
    for subject in ("alice", "bob"):
        assert one.store.shown_get("t1", subject, "s-1", since, 50) == first - {gone}
    rt = build_runtime(
        load_settings({"database": "unused.db"}, environ={}),
        one.memories,
        extractor=DeterministicExtractor(),
    )
    job, _ = rt.governance.erase_subject(ADMIN, "u-alice", reason="request 42")
    rt.worker.drain()
    done = rt.governance.erasure_job(ADMIN, job.job_id)
    assert done.status.value == "succeeded", done.last_error
    assert done.result["counts"]["knowledge_shown"] == 1
    assert not one.store.shown_get("t1", "alice", "s-1", since, 50)
    assert one.store.shown_get("t1", "bob", "s-1", since, 50) == first - {gone}  # not hers
