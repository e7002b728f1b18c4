"""Harvest on every backend (issue 24, HARVEST-1): spans queued at once and extracted as one
batch (a pronoun in a later span resolved with the person an earlier span named); a full queue
or a store outage drops the batch with a counted, visible reason and never fails the caller;
hostile spans refused with stable 422 codes."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence

import pytest

from quipu.core.query import Filters
from quipu.core.records import Principal, Source
from quipu.core.scopes import resolve_scope
from quipu.errors import Forbidden, InvalidInput
from quipu.extraction.base import ExtractionResult, Extractor, Turn
from quipu.extraction.deterministic import DeterministicExtractor
from quipu.harvest import Harvester
from quipu.memories import MemoryService

SPANS = [
    "My sister Ana is a doctor.",
    "We talked about the weather today.",
    "She moved to Porto last year.",
]


class Gated(Extractor):
    """The real deterministic extractor, held at a gate so a test can fill the queue."""

    extractor_id = "gated-deterministic"
    version = "1"

    def __init__(self) -> None:
        self.inner = DeterministicExtractor()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def run(self, turns: Sequence[Turn], *, allowed_ids: Collection[str] = ()) -> ExtractionResult:
        self.entered.set()
        self.gate.wait(10)
        return self.inner.run(turns, allowed_ids=allowed_ids)


def _harvested(service: MemoryService, who: Principal) -> list[str]:
    page = service.store.list_page(
        resolve_scope(who, "agent"), Filters(sources=frozenset({Source.HARVESTED})), None, 100
    )
    return sorted(m.text for m in page.items)


def test_harvest_1_whole_batch_keeps_the_cross_span_reference(
    service: MemoryService, alice: Principal
) -> None:
    harvester = Harvester(service, DeterministicExtractor())
    receipt = harvester.harvest(alice, SPANS, boundary="compaction", session_id="run-7")
    assert receipt.accepted and receipt.spans == 3 and receipt.reason is None
    assert harvester.drain(20)
    texts = _harvested(service, alice)
    assert "User's sister Ana moved to Porto last year" in texts  # span 3 resolved by span 1
    page = service.store.list_page(
        resolve_scope(alice, "agent"), Filters(sources=frozenset({Source.HARVESTED})), None, 10
    )
    moved = next(m for m in page.items if "Porto" in m.text)
    assert moved.trust.value == "unverified" and moved.provenance.session_id == "run-7"
    assert moved.metadata["boundary"] == "compaction" and moved.metadata["span"] == 2
    assert harvester.stats()["counts"]["extracted:compaction"] == 1
    harvester.close()


def test_harvest_1_full_queue_drops_the_batch_counted_not_failed(
    service: MemoryService, alice: Principal
) -> None:
    gated = Gated()
    harvester = Harvester(service, gated, capacity=1)
    first = harvester.harvest(alice, SPANS)
    assert gated.entered.wait(10)  # the thread holds the first batch
    second = harvester.harvest(alice, ["I live in Lisbon."], boundary="recap")
    third = harvester.harvest(alice, ["I work at a bakery."], boundary="stateful")
    assert first.accepted and second.accepted
    assert (third.accepted, third.reason) == (False, "queue_full")
    assert harvester.stats()["counts"]["dropped:queue_full"] == 1
    gated.gate.set()
    assert harvester.drain(20)
    texts = _harvested(service, alice)
    assert any("Lisbon" in t for t in texts) and not any("bakery" in t for t in texts)
    harvester.close()


def test_harvest_1_store_outage_drops_the_batch_counted(
    service: MemoryService, alice: Principal
) -> None:
    gated = Gated()
    harvester = Harvester(service, gated)
    seen: list[tuple[str, str]] = []
    harvester.observer = lambda outcome, reason: seen.append((outcome, reason))
    receipt = harvester.harvest(alice, SPANS)
    assert receipt.accepted  # the caller is answered before the store is touched
    assert gated.entered.wait(10)
    service.store.close()
    gated.gate.set()
    assert harvester.drain(20)
    assert harvester.stats()["counts"]["dropped:store_unavailable"] == 1
    assert ("dropped", "store_unavailable") in seen
    harvester.close()


@pytest.mark.parametrize(
    ("spans", "boundary", "code"),
    [
        ([], "compaction", "invalid_spans"),
        (["x"] * 65, "compaction", "invalid_spans"),
        ("just a string", "compaction", "invalid_spans"),
        (["   "], "compaction", "invalid_spans"),
        ([{"role": "wizard", "content": "hi"}], "compaction", "invalid_spans"),
        ([{"content": "hi", "tenant_id": "t2"}], "compaction", "invalid_spans"),
        ([42], "compaction", "invalid_spans"),
        (["x" * 32_001], "compaction", "invalid_spans"),
        (["ok"], "summary", "invalid_boundary"),
        (["nul\x00byte"], "compaction", "invalid_text"),
        (["lone \ud800 surrogate"], "compaction", "invalid_text"),
    ],
)
def test_harvest_1_hostile_spans_are_422(
    service: MemoryService, alice: Principal, spans: object, boundary: str, code: str
) -> None:
    harvester = Harvester(service, DeterministicExtractor())
    with pytest.raises(InvalidInput) as bad:
        harvester.harvest(alice, spans, boundary=boundary)
    assert bad.value.code == code and bad.value.status == 422
    assert harvester.stats()["queued"] == 0


def test_harvest_1_tenant_scope_needs_the_grant(service: MemoryService, alice: Principal) -> None:
    harvester = Harvester(service, DeterministicExtractor())
    with pytest.raises(Forbidden):
        harvester.harvest(alice, SPANS, scope="tenant")
