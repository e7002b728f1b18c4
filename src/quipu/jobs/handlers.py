"""The job kinds a worker runs, and the schedule of periodic sweeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.consolidation.index import IndexService
from quipu.consolidation.jobs import CONSOLIDATE_INDEX, SWEEP_INDEXES, IndexJobs
from quipu.core.knowledge import SHOWN_TTL
from quipu.documents import DocumentService
from quipu.extraction.base import Extractor
from quipu.governance import ERASE_SUBJECT, GovernanceService
from quipu.harvest import HARVEST_BATCH, Harvester
from quipu.jobs.backfill import embed_pending
from quipu.jobs.ingest import INGEST_DOCUMENT, DocumentIngest
from quipu.jobs.promotion import EMBED_PENDING, Promoter, PromotionConfig, sweep
from quipu.jobs.queue import JobQueue, Lease
from quipu.jobs.worker import Handler, Periodic, Worker
from quipu.knowledge import KnowledgeService
from quipu.memories import MemoryService
from quipu.sessions import PROMOTE
from quipu.settings import Settings
from quipu.usage import Graduation

SWEEP = "sweep_sessions"
PRUNE = "prune_sessions"
EMBED = EMBED_PENDING
MAINTAIN = "maintain_store"
GRADUATE = "graduate_memories"


def build_worker(
    settings: Settings,
    service: MemoryService,
    queue: JobQueue,
    extractor: Extractor,
    governance: GovernanceService | None = None,
    index: IndexService | None = None,
    harvest: Harvester | None = None,
) -> Worker:
    """The worker of every job kind; ``governance`` adds subject erasure (LIFE-4), ``index``
    the memory index's sweep and rebuilds (CONSOL-1, CONSOL-5), ``harvest`` the durable harvest
    batches (HARVEST-1)."""
    promoter = Promoter(
        service.for_jobs(),
        extractor,
        PromotionConfig(
            min_confidence=settings.promotion_min_confidence,
            max_candidates=settings.promotion_max_candidates,
            scope=settings.promotion_scope,
            budget_per_hour=settings.model_budget_per_hour,
            episodes=settings.promotion_episodes,
            defer_episode_embedding=settings.promotion_defer_episode_embedding,
        ),
    )
    window = timedelta(seconds=settings.sweep_window_seconds)

    def promote(lease: Lease) -> dict[str, Any]:
        return promoter.handle(lease)

    def sweep_sessions(_lease: Lease) -> dict[str, Any]:
        return sweep(service, window, 500, lambda: datetime.now(UTC))

    def prune(_lease: Lease) -> dict[str, Any]:
        deleted = 0
        while True:
            n = service.store.prune_turns(datetime.now(UTC), 5000)
            deleted += n
            if n < 5000:  # and the merged-recall shown history past its time (RECALL-9)
                shown = service.store.shown_expire(datetime.now(UTC) - SHOWN_TTL)
                return {"deleted": deleted, "shown_expired": shown}

    def embed(_lease: Lease) -> dict[str, Any]:
        return dict(embed_pending(service.for_jobs()))

    def maintain(_lease: Lease) -> dict[str, Any]:
        return dict(service.store.maintain())

    handlers: dict[str, Handler] = {
        PROMOTE: promote,
        SWEEP: sweep_sessions,
        PRUNE: prune,
        EMBED: embed,
        MAINTAIN: maintain,
    }
    if governance is not None:
        handlers[ERASE_SUBJECT] = governance.run_subject_erasure
    graduation = Graduation(KnowledgeService(service.for_jobs()))  # GRAD-1

    def graduate(_lease: Lease) -> dict[str, Any]:
        return graduation.sweep()

    handlers[GRADUATE] = graduate
    if service.embedder is not None:  # large documents (DOC-1): embedded by this worker
        handlers[INGEST_DOCUMENT] = DocumentIngest(DocumentService(service.for_jobs())).run
    interval = timedelta(seconds=settings.sweep_interval_seconds)
    periodic: tuple[Periodic, ...] = (
        Periodic(SWEEP, interval),
        Periodic(PRUNE, interval),
        Periodic(EMBED, interval),
        Periodic(MAINTAIN, interval),
        Periodic(GRADUATE, interval),
    )
    if index is not None:
        jobs = IndexJobs(
            index,
            queue,
            debounce=timedelta(seconds=settings.index_debounce_seconds),
            cooldown=timedelta(seconds=settings.index_cooldown_seconds),
            tenants=(settings.local_tenant,),
        )
        handlers[SWEEP_INDEXES] = jobs.sweep
        handlers[CONSOLIDATE_INDEX] = jobs.consolidate
        periodic += (Periodic(SWEEP_INDEXES, interval),)
    if harvest is not None:
        handlers[HARVEST_BATCH] = harvest.run
    return Worker(queue, handlers, periodic=periodic)
