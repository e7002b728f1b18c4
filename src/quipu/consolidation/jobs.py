"""The durable jobs that keep each scope's memory index current (CONSOL-1, CONSOL-4).

- ``sweep_indexes`` (periodic): per tenant, finds the scopes written since the tenant's sweep
  mark and quiet for ``debounce`` since, and enqueues one ``consolidate_index`` job per scope.
  The job's idempotency key names the scope, so a scope written again while its job waits gets
  no second job (debounced); the mark then moves up to where the sweep looked. Scopes whose
  index is older than ``refresh`` are enqueued too, so usage-based expiry (CONSOL-5) runs on
  scopes nobody writes to.
- ``consolidate_index``: rebuilds one scope's index; a build that changes nothing writes no
  version. Consolidation of one scope is serialised by the scope's lease (CONSOL-4), durable
  in the store and shared by every worker and by an explicit rebuild, with ``cooldown``
  between two runs: a job that finds the lease held or cooling down goes back to the queue
  until it is free (:class:`~quipu.jobs.worker.Deferred`). The queue also runs one job per
  key at a time, and the store refuses a rewrite that does not follow the version it read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from quipu.consolidation.index import ConsolidationBusy, IndexService
from quipu.core.jobs import NewJob
from quipu.core.records import Scope, ScopeRef
from quipu.core.scopes import GLOBAL_TENANT
from quipu.jobs.queue import JobQueue, Lease
from quipu.jobs.worker import Deferred

SWEEP_INDEXES = "sweep_indexes"
CONSOLIDATE_INDEX = "consolidate_index"
#: Scopes one sweep enqueues per tenant at most; the rest wait for the next sweep.
MAX_SCOPES_PER_TENANT = 1_000


class IndexJobs:
    """The two job handlers over one :class:`IndexService` and queue."""

    def __init__(
        self,
        index: IndexService,
        queue: JobQueue,
        *,
        debounce: timedelta,
        refresh: timedelta = timedelta(days=1),
        cooldown: timedelta = timedelta(0),
        tenants: Iterable[str] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.index = index
        self.queue = queue
        self.debounce = debounce
        self.refresh = refresh
        self.cooldown = cooldown
        self.extra_tenants = tuple(tenants)
        self._clock = clock or (lambda: datetime.now(UTC))

    def sweep(self, _lease: Lease | None = None) -> dict[str, Any]:
        """Enqueue a rebuild for every scope written and quiet since the last sweep."""
        store = self.index.store
        until = self._clock() - self.debounce
        tenants = {t.tenant_id for t in store.list_tenants()}
        tenants.update(self.extra_tenants)
        tenants.add(GLOBAL_TENANT)
        enqueued = scanned = 0
        for tenant in sorted(tenants):
            mark = store.index_sweep_mark(tenant)
            changed = store.index_changed_scopes(tenant, mark, until, MAX_SCOPES_PER_TENANT)
            scanned += len(changed)
            due = store.index_due(tenant, self._clock() - self.refresh, MAX_SCOPES_PER_TENANT)
            for ref in [r for r, _ in changed] + due:
                _, new = self.queue.enqueue(
                    NewJob(
                        tenant,
                        CONSOLIDATE_INDEX,
                        f"index:{ref.scope.value}:{ref.owner}",
                        payload={"scope": ref.scope.value, "owner": ref.owner},
                    )
                )
                enqueued += int(new)
            if len(changed) >= MAX_SCOPES_PER_TENANT:
                store.index_set_sweep_mark(tenant, changed[-1][1])
            elif changed or mark is None or mark < until:
                store.index_set_sweep_mark(tenant, until)
        return {"scopes": scanned, "enqueued": enqueued}

    def consolidate(self, lease: Lease) -> dict[str, Any]:
        """Rebuild the job's scope (a build that changes nothing writes no version)."""
        job = lease.job
        ref = ScopeRef(job.tenant_id, Scope(str(job.payload["scope"])), str(job.payload["owner"]))
        try:
            built = self.index.consolidate(ref, cooldown=self.cooldown)
        except ConsolidationBusy as exc:
            until = exc.retry_at or self._clock() + timedelta(seconds=1)
            raise Deferred(exc.message, until=until, code=exc.code) from exc
        return {
            "version": built.version,
            "active": len(built.active),
            "archived": len(built.archive),
            "expired": len(built.expired),
        }
