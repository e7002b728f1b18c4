"""Near-duplicate corroboration on every backend (issue 22 gap 3, CONSOL-3): an independent
source restating an unverified memory in near-identical meaning (cosine at least
NEAR_CORROBORATION, the threshold measured in tests/unit/test_corroboration_threshold.py)
verifies it on a new version, audited, with the cosine in its reason; the same agent, the same
session or an unrelated statement does not."""

from __future__ import annotations

import numpy as np

from quipu.core.records import Principal, Relation, Role, Trust
from quipu.corroboration import NEAR_CORROBORATION
from quipu.memories import MemoryService

PLANNER = Principal("t1", "key-planner", Role.AGENT, agent_id="planner", user_id="u1")
COACH = Principal("t1", "key-coach", Role.AGENT, agent_id="coach", user_id="u1")
FACT = "Mira takes the 7:40 train to Leeds every Monday"
RESTATED = "Every Monday morning Mira catches the 7:40 train to Leeds"
UNRELATED = "Mira's sister keeps bees in her garden in Bath"


def _cosine(service: MemoryService, a: str, b: str) -> float:
    assert service.embedder is not None
    x, y = service.embedder.embed_batch([a, b])
    return float(np.dot(x, y))


def test_consol_003_an_explicit_near_restatement_corroborates(service: MemoryService) -> None:
    """Issue 22 gap 3: another agent's explicit write of near-identical meaning verifies the
    extracted memory (judges, corroborated, cosine in the reason, audited); the same agent's
    restatement and an unrelated statement do not."""
    assert _cosine(service, FACT, RESTATED) >= NEAR_CORROBORATION
    assert _cosine(service, FACT, UNRELATED) < NEAR_CORROBORATION
    first = service.remember(PLANNER, FACT, scope="user", source="extracted").memory
    assert first.trust is Trust.UNVERIFIED
    service.remember(PLANNER, RESTATED, scope="user")  # the same agent: not a second source
    service.remember(COACH, UNRELATED, scope="user")  # not the same meaning
    assert service.get(COACH, first.id).trust is Trust.UNVERIFIED
    written = service.remember(COACH, RESTATED + " again", scope="user")
    assert written.created and written.memory.id != first.id
    m = service.get(COACH, first.id)
    assert (m.version, m.trust, m.relation) == (2, Trust.VERIFIED, Relation.JUDGES)
    assert (m.provenance.verdict, m.provenance.judged_by) == ("corroborated", "key-coach")
    assert m.reason is not None and "near-identical" in m.reason and "cosine" in m.reason
    lines = [(e.action, e.actor_key) for e in service.store.list_audit("t1", None, 20)]
    assert ("memory.judges", "key-coach") in lines


def test_consol_003_a_near_restatement_in_another_session_corroborates(
    service: MemoryService,
) -> None:
    """Issue 22 gap 3: a promoted statement from another session restating a promoted memory
    verifies it; one from the same session does not."""
    first = service.remember(
        PLANNER, FACT, scope="user", source="promoted", session_id="s-1"
    ).memory
    service.remember(PLANNER, RESTATED, scope="user", source="promoted", session_id="s-1")
    assert service.get(PLANNER, first.id).trust is Trust.UNVERIFIED
    later = service.remember(
        PLANNER, RESTATED + " too", scope="user", source="promoted", session_id="s-2"
    ).memory
    m = service.get(PLANNER, first.id)
    assert (m.trust, m.provenance.verdict) == (Trust.VERIFIED, "corroborated")
    assert m.reason is not None and "another session" in m.reason
    assert later.version == 2  # the write answers the memory as it is now
    both = service.get(PLANNER, later.id)  # each session corroborates the other
    assert (both.version, both.trust, both.provenance.verdict) == (
        2,
        Trust.VERIFIED,
        "corroborated",
    )
