"""What the composition root hands to every surface: the use cases, sessions, the job queue and
a worker. It sits below both, so a surface names its type without importing the composition
root, and the composition root builds it without importing a surface."""

from __future__ import annotations

from dataclasses import dataclass

from quipu.consolidation.index import IndexService
from quipu.governance import GovernanceService
from quipu.harvest import Harvester
from quipu.jobs.queue import JobQueue
from quipu.jobs.worker import Worker
from quipu.memories import MemoryService
from quipu.sessions import SessionService


@dataclass
class Runtime:
    """Everything a surface needs: the memory and governance use cases, sessions, the job
    queue and a worker."""

    service: MemoryService
    sessions: SessionService
    queue: JobQueue
    worker: Worker
    governance: GovernanceService
    index: IndexService | None = None
    """The compiled memory index (CONSOL-1, API-3 ``index_get``)."""
    harvest: Harvester | None = None
    """The harvest queue of evicted context spans (HARVEST-1)."""

    def close(self) -> None:
        self.worker.stop()
        if self.harvest is not None:
            self.harvest.close()
        self.service.close()
        self.service.store.close()
