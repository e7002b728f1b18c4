"""Knowledge updates of quantities across sessions (issue 24; PROMO-4, MEM-4): a frequency, a
count or an amount the user states again with a new value ("yoga twice a week", months later
"yoga classes, which is three times a week") supersedes the earlier promoted fact through the
quantity slot (``extraction.quantities``, extractor 1.5), in order or out of order; an explicit
memory is never replaced; different attributes (a sister's children and a brother's, tennis
and table tennis, two races) never replace each other. Before 1.5 the old value stayed current
in every measured LongMemEval update of this kind (0/3 superseded). The turns are quoted from
the tuning half of the LongMemEval pairs (``evals/data/knowledge_updates``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.composition import build_runtime, load_settings
from quipu.core.limits import Limits
from quipu.core.records import Kind, Principal, Status
from quipu.embeddings.local import LocalEmbedder
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.memories import MemoryService
from quipu.runtime import Runtime

AUGUST = datetime(2023, 8, 11, 5, 12, tzinfo=UTC)
NOVEMBER = datetime(2023, 11, 30, 3, 29, tzinfo=UTC)
YOGA_OLD = (
    "By the way, I've been trying to prioritize my self-care too. I've been doing yoga twice "
    "a week, which has really been helping me relax and focus."
)
YOGA_NEW = (
    "Oh, and I've noticed that I'm more focused on days when I attend yoga classes, which is "
    "three times a week - it really helps me clear my head."
)
CARDS_OLD = (
    "By the way, I just got a signed baseball of his last week and it's a great addition to my "
    "collection - that's 15 autographed baseballs since I started collecting three months ago!"
)
CARDS_NEW = (
    "By the way, I just got back from a weekend trip and had some time to organize my "
    "collection - I've added 20 autographed baseballs to my collection in the past few months, "
    "which is crazy!"
)


def _runtime(make_store: Callable[..., Any], local_embedder: LocalEmbedder) -> Runtime:
    s = load_settings({"database": "unused.db"}, environ={})
    service = MemoryService(make_store(), local_embedder, Limits())
    return build_runtime(s, service, extractor=DeterministicExtractor())


def _session(rt: Runtime, who: Principal, session: str, at: datetime, *turns: str) -> None:
    said = [("user", text) for text in turns] + [("assistant", "Thanks, noted.")]
    for i, (role, text) in enumerate(said):  # a session of one turn is not promoted
        rt.sessions.append(who, session, role, text, observed_at=at + timedelta(minutes=i))
    rt.sessions.promote(who, session)
    rt.worker.drain()


def _facts(rt: Runtime, who: Principal, status: str, word: str) -> list[Any]:
    page = rt.service.list(
        who, scope="agent_user", sources=["promoted"], limit=200, statuses=[status]
    )
    return [m for m in page.items if m.kind is not Kind.EPISODE and word in m.text.lower()]


def test_promo_004_issue24_a_new_frequency_supersedes_the_old(
    make_store: Callable[..., Any], local_embedder: LocalEmbedder, alice: Principal
) -> None:
    rt = _runtime(make_store, local_embedder)
    _session(rt, alice, "aug", AUGUST, YOGA_OLD)
    _session(rt, alice, "nov", NOVEMBER, YOGA_NEW)
    current = [m.text for m in _facts(rt, alice, "active", "yoga")]
    assert current == ["User attends yoga classes three times a week"], current
    old = _facts(rt, alice, "superseded", "yoga")
    assert [m.text for m in old] == ["User has been doing yoga twice a week"]
    assert old[0].status is Status.SUPERSEDED and old[0].invalid_at is not None
    rt.close()


def test_promo_004_issue24_a_count_promoted_out_of_order_keeps_the_newer(
    make_store: Callable[..., Any], local_embedder: LocalEmbedder, alice: Principal
) -> None:
    rt = _runtime(make_store, local_embedder)
    _session(rt, alice, "later", NOVEMBER, CARDS_NEW)
    _session(rt, alice, "earlier", AUGUST, CARDS_OLD)
    current = [m.text for m in _facts(rt, alice, "active", "baseball")]
    assert len(current) == 1 and "20 autographed baseballs" in current[0], current
    old = [m.text for m in _facts(rt, alice, "superseded", "baseball")]
    assert old == ["User's collection has 15 autographed baseballs"], old
    rt.close()


def test_promo_004_issue24_an_explicit_quantity_is_never_replaced(
    make_store: Callable[..., Any], local_embedder: LocalEmbedder, alice: Principal
) -> None:
    rt = _runtime(make_store, local_embedder)
    explicit = rt.service.remember(
        alice,
        "User has been doing yoga twice a week",
        scope="agent_user",
        tags=["slot:q:freq:yoga"],
    )
    _session(rt, alice, "nov", NOVEMBER, YOGA_NEW)
    kept = rt.service.get(alice, explicit.memory.id)
    assert kept.status is Status.ACTIVE and kept.is_current
    assert _facts(rt, alice, "active", "three times a week")
    rt.close()


def test_promo_004_issue24_different_attributes_are_never_collapsed(
    make_store: Callable[..., Any], local_embedder: LocalEmbedder, alice: Principal
) -> None:
    """Near misses: a sister's children and a brother's, table tennis and tennis, a 5K and a
    marathon personal best each stay current beside the other."""
    rt = _runtime(make_store, local_embedder)
    _session(
        rt,
        alice,
        "aug",
        AUGUST,
        "My sister has two kids.",
        "I play tennis every week.",
        "My personal best in the 5K is 24:10.",
    )
    _session(
        rt,
        alice,
        "nov",
        NOVEMBER,
        "My brother has three kids.",
        "I play table tennis twice a month.",
        "My personal best in the marathon is 3:58:20.",
    )
    assert not [m.text for m in _facts(rt, alice, "superseded", "")]
    current = [m.text for m in _facts(rt, alice, "active", "")]
    for said in ("sister", "brother", "tennis every week", "table tennis", "5K", "marathon"):
        assert any(said in text for text in current), (said, current)
    rt.close()
