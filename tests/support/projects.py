"""Register projects in a test store (SCOPE-6: writes name a registered project)."""

from __future__ import annotations

from datetime import UTC, datetime

from quipu.core.governance import Project
from quipu.storage.base import Store


def register(store: Store, tenant_id: str, *project_ids: str) -> None:
    for ident in project_ids:
        store.put_project(Project(tenant_id, ident, None, "test", datetime.now(UTC)))
