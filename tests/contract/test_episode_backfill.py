"""Episodes embedded after promotion, not inside it (issue 24, promotion cost; PROMO-1,
CONSOL-3), through real stores and the bundled model.

Promotion cost 154 ms per session median against the 50 ms target because every turn was
embedded as an episode inside the promotion. Now an episode is written without a vector, the
promotion enqueues one durable ``embed_pending`` job, recall finds the episode by its words
until the job has run, and the job gives every episode its vector in batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.composition import build_runtime, load_settings
from quipu.core.jobs import JobStatus
from quipu.core.limits import Limits
from quipu.core.records import Kind, Principal
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.jobs.promotion import EMBED_PENDING
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService
from quipu.sessions import PROMOTE

SAID = datetime(2023, 5, 20, 14, 30, tzinfo=UTC)
CHAT = [
    ("user", "My sister Quentara keeps bees on the roof of her flat in Lisbon."),
    ("assistant", "Rooftop beekeeping needs a water tray and shade for the hive in summer."),
    ("user", "I spent 70 hours restoring my grandfather's oak desk last year."),
]
#: The same things said again in other words, in another session.
RETOLD = [
    ("user", "Quentara, my sister, has beehives up on her Lisbon rooftop."),
    ("assistant", "For hives on a roof, give the bees shade and a tray of water in summer."),
    ("user", "Restoring the oak desk my grandfather left me took 70 hours."),
]


def _runtime(make_store, local_embedder, name="quipu.db", **settings: Any):  # type: ignore[no-untyped-def]
    s = load_settings({"database": "unused.db", **settings}, environ={})
    service = MemoryService(make_store(name), local_embedder, Limits())
    return build_runtime(s, service, extractor=DeterministicExtractor())


def _promote_only(rt, who: Principal, session: str, chat=CHAT) -> None:  # type: ignore[no-untyped-def]
    """Append and promote ``session``, running the promotion job and nothing else."""
    for i, (role, text) in enumerate(chat):
        rt.sessions.append(who, session, role, text, observed_at=SAID + timedelta(minutes=i))
    rt.sessions.promote(who, session)
    assert Worker(rt.queue, {PROMOTE: rt.worker.handlers[PROMOTE]}).drain() == 1


def _promoted(rt, who: Principal) -> list[Any]:  # type: ignore[no-untyped-def]
    return list(rt.service.list(who, scope="agent_user", sources=["promoted"], limit=200).items)


def _queued_embeds(rt) -> list[Any]:  # type: ignore[no-untyped-def]
    jobs = rt.queue.store.list_jobs(None, JobStatus.QUEUED, 100)
    return [j for j in jobs if j.kind == EMBED_PENDING]


def test_issue24_promotion_leaves_episode_vectors_to_a_durable_backfill(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    rt = _runtime(make_store, local_embedder)
    _promote_only(rt, alice, "s1")
    written = _promoted(rt, alice)
    episodes = [m for m in written if m.kind is Kind.EPISODE]
    facts = [m for m in written if m.kind is not Kind.EPISODE]
    assert len(episodes) == 3 and facts
    assert all(e.embedding_model is None for e in episodes)  # no model call per turn
    assert all(f.embedding_model == local_embedder.model_id for f in facts)  # facts as before
    pending = {text for _, _, text in rt.service.store.missing_vectors(100)}
    assert {e.text for e in episodes} <= pending
    assert len(_queued_embeds(rt)) == 1  # durable: a job row, not a thread

    # Before the backfill, recall finds an episode by its words (keyword half of the search).
    found = rt.service.recall(alice, "Quentara bees roof Lisbon", scope="agent_user", k=5)
    assert any(h.memory.kind is Kind.EPISODE and "Quentara" in h.memory.text for h in found.results)

    # A second session's promotion shares the queued job (one per key while it waits).
    _promote_only(rt, alice, "s2")
    assert len(_queued_embeds(rt)) == 1

    rt.worker.drain()
    assert rt.service.store.missing_vectors(100) == []
    embedded = [m for m in _promoted(rt, alice) if m.kind is Kind.EPISODE]
    assert embedded and all(e.embedding_model == local_embedder.model_id for e in embedded)
    # and by meaning now: no shared keyword with the assistant's episode
    found = rt.service.recall(alice, "apiary on a rooftop in hot weather", scope="agent_user", k=3)
    assert any("Rooftop beekeeping" in h.memory.text for h in found.results)
    rt.close()


def test_issue24_inline_episode_embedding_stays_available(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """``promotion_defer_episode_embedding=false``: the episodes get their vectors inside the
    promotion and no backfill job is queued (the behaviour the eval compares against)."""
    rt = _runtime(make_store, local_embedder, promotion_defer_episode_embedding=False)
    _promote_only(rt, alice, "s1")
    episodes = [m for m in _promoted(rt, alice) if m.kind is Kind.EPISODE]
    assert len(episodes) == 3
    assert all(e.embedding_model == local_embedder.model_id for e in episodes)
    assert _queued_embeds(rt) == []
    rt.close()


def test_issue24_backfill_leaves_what_an_inline_write_would_have(
    make_store, local_embedder, alice: Principal
) -> None:  # type: ignore[no-untyped-def]
    """Once drained, deferred episodes carry at least the inline write's trust: a restatement
    from another session in near-identical meaning corroborates (CONSOL-3). The first backfill only
    attached vectors, so 318 of 454 LoCoMo memories stayed unverified that inline writes had
    verified."""
    trust = {}
    for defer in (True, False):
        rt = _runtime(
            make_store, local_embedder, f"{defer}.db", promotion_defer_episode_embedding=defer
        )
        _promote_only(rt, alice, "s1")
        _promote_only(rt, alice, "s2", RETOLD)
        rt.worker.drain()
        trust[defer] = {(m.kind, m.text): m.trust.value for m in _promoted(rt, alice)}
        rt.close()
    assert trust[True].keys() == trust[False].keys()
    inline = {k for k, v in trust[False].items() if v == "verified"}
    deferred = {k for k, v in trust[True].items() if v == "verified"}
    assert inline and inline <= deferred
    # The backfill looks at every row there when it runs; an inline write only at rows before
    # it: a restatement the earlier session's row did not see yet may verify one more pair.
