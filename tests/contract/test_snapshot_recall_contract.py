"""A snapshot pinned from a merged recall (issue 22, LIFE-8 with RECALL-9): the memories that
recall showed this caller, each at the version current when it was recalled — not what they
became since — and nothing for another subject, another tenant or a recall that never was."""

from __future__ import annotations

import pytest

from quipu.core.records import Principal, Role
from quipu.errors import InvalidInput, NotFound
from quipu.governance import GovernanceService
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.recall_context import MergedRecall

ADMIN = Principal("t1", "key-admin", Role.ADMIN, agent_id="ops")
FOREIGN = Principal("t2", "key-foreign", Role.ADMIN, agent_id="ops")


def test_life_008_snapshot_from_a_recall_pins_what_it_showed(
    service: MemoryService, alice: Principal, bob: Principal
) -> None:
    merged = MergedRecall(KnowledgeService(service))
    gov = GovernanceService(service)
    try:
        deploy = service.remember(alice, "The staging deploy needs the VPN switched on.").memory
        day = service.remember(alice, "Alice deploys staging on Thursdays.", scope="user").memory
        article = merged.knowledge.create(
            ADMIN, "Deploying to staging", "Run make deploy-staging from the release branch."
        ).article
        shown = merged.recall_context(alice, "deploy staging", scopes=["agent", "user"])
        ids = [r["id"] for r in shown.results]
        assert {deploy.id, day.id, article.id} <= set(ids)

        # the agent memory changes after the recall: the snapshot pins what was read
        service.revise(alice, deploy.id, "The staging deploy needs no VPN now.", expected_version=1)
        snap = gov.snapshot_create(alice, recall_id=shown.recall_id, label="run 7")
        pinned = {m.id: m.version for m in snap.members}
        assert pinned == {deploy.id: 1, day.id: 1}  # memories only, as they were recalled

        for who in (bob, FOREIGN):  # shown to alice only; another tenant sees no such recall
            with pytest.raises(NotFound):
                gov.snapshot_create(who, recall_id=shown.recall_id)
        with pytest.raises(NotFound):
            gov.snapshot_create(alice, recall_id="0" * 32)
        for bad in ({"ids": [deploy.id]}, {"members": [{"id": deploy.id, "version": 1}]}):
            with pytest.raises(InvalidInput) as both:
                gov.snapshot_create(alice, recall_id=shown.recall_id, **bad)
            assert both.value.code == "invalid_snapshot"
        for hostile in ("../x", "a\x00b", "\ud800", 7):
            with pytest.raises(InvalidInput):
                gov.snapshot_create(alice, recall_id=hostile)
    finally:
        merged.close()
