"""Issue 23: one process that searched 1,000 small scopes held 2.6 GiB, its scope indexes kept
until they summed two million rows. ``index_cache_mib`` bounds them by bytes: the least recently
searched scopes are dropped, the last one always kept, and a dropped scope searches the same
when it comes back. A real SQLite file and the real bundled model; the vectors are the model's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import quipu
from quipu.core.records import Scope, ScopeRef
from quipu.embeddings.local import LocalEmbedder
from quipu.evals.perf import imported_fact

_TEXTS = [f"Day {i}: the team shipped feature number {i} after the review." for i in range(300)]


_AT = datetime(2026, 1, 1, tzinfo=UTC)


def _page(mem: quipu.Quipu, tenant: str) -> list[str]:
    principal = replace(mem.principal, tenant_id=tenant, agent_id="small")
    found = mem.service.recall(principal, "feature number 7", scope="agent", k=5)
    return [h.memory.text for h in found.results]


def test_issue23_index_cache_bounded_by_bytes(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    mem = quipu.open(
        tmp_path / "many.db", embedder=local_embedder, worker_embedded=False, index_cache_mib=1
    )
    store = mem.service.store
    pin = store.embedding_pin()
    assert pin is not None
    # the model's vectors of 20 of the texts, each shared by 15 rows (an index's size is what
    # counts here, not its ranking)
    vectors = np.asarray(local_embedder.embed_batch(_TEXTS[:20]), dtype=np.float32)
    tenants = [f"tenant-{i}" for i in range(4)]
    for tenant in tenants:  # 300 rows x 384 floats: ~0.55 MiB of index per scope
        rows = [
            (imported_fact(tenant, "small", text, at=_AT, model=pin.model_id), vectors[i % 20])
            for i, text in enumerate(_TEXTS)
        ]
        assert store.import_versions(rows) == len(_TEXTS)
    pages = {tenant: _page(mem, tenant) for tenant in tenants}
    kept = list(store._indexes)  # the process's scope indexes, least recently used first
    assert kept == [ScopeRef(tenants[-1], Scope.AGENT, "small")]  # 2 x 0.55 MiB > 1 MiB
    first = _page(mem, tenants[0])
    assert first and first == pages[tenants[0]]  # loaded again, the same page
    mem.close()
