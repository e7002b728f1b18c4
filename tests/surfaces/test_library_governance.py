"""The governance verbs of the embedded library, ``quipu.open`` (API-1, issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

import quipu
from quipu.embeddings.local import LocalEmbedder
from quipu.errors import Conflict


def test_api_001_library_erases_holds_snapshots_and_projects(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    with quipu.open(tmp_path / "lib.db", embedder=local_embedder, worker_embedded=False) as mem:
        m = mem.remember("Ona Kestrel keeps bees on the roof", scope="user")
        kept = mem.remember("The deploy runs at nine")
        snap = mem.snapshot(ids=[m.id, kept.id], label="run 1")
        hold = mem.hold("subject", "local-user", reason="case 9")
        with pytest.raises(Conflict) as err:
            mem.erase(m.id, reason="request")
        assert err.value.code == "legal_hold"
        mem.release_hold(hold.hold_id, reason="closed")
        job = mem.erase_subject("local-user", reason="art. 17", wait=True)
        assert job.status.value == "succeeded" and job.result["families"] == 1
        members = {x.id: why for x, _, why in mem.resolve_snapshot(snap.snapshot_id).members}
        assert members == {m.id: "erased", kept.id: None}
        assert mem.history(m.id)[-1].status.value == "erased"
        mem.create_project("apollo")
        assert mem.remember("apollo ships Monday", project="apollo").project == "apollo"
        assert [p.project_id for p in mem.projects()] == ["apollo"]
        events, _ = mem.audit()
        assert {"subject.erase", "hold.set", "hold.release", "snapshot.create"} <= {
            e.action for e in events
        }
