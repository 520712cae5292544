"""Retention: delete what outlived its configured age, across tenants, in short batches.

Contract: ``RetentionService.run(dry_run=False, tenant_ids=None)`` walks every tenant
(``RetentionStore.tenants``, or ``tenant_ids``) and every target with its age in days
(``RetentionPolicy``): manifests, audit records, idle sessions (with their events) and
superseded knowledge versions (with their chunks). Each batch is one short transaction
deleting at most ``batch`` rows of the target's unit; the target is done for the tenant when
a batch deletes none. The sessions a batch removed lose their cached keys
(``SessionCache.drop``: tail and pinned memory snapshot) after the commit; keys that cannot
be dropped are logged and expire on their TTL (a stale tail is not served meanwhile: a turn
serves a tail only for a session the archive still has, ``SessionService.hot_tail``).

With ``dry_run`` nothing is deleted: the report holds what a run would delete now. The
report (``RetentionReport``) counts rows per table; a real run adds them to
``ctxgate_retention_pruned_rows_total{table}`` and sets the last run's end time and
duration. Runs do not overlap, across processes either (``RetentionStore.exclusive``): one
that finds another in progress returns at once, ``skipped``. A tenant whose batch fails is
logged and listed in ``failed_tenants`` (the next run retries it); the others still run.
``RetentionWorker`` runs it every ``interval_s``. See docs/retention.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.observability import RETENTION_TABLES, Metrics
from app.ports import RetentionStore, RetentionTarget, SessionCache
from app.service.background import Poller

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Ages in whole days (settings ``*_retention_days``) and the batch bound."""

    manifests_days: int = 30
    audit_days: int = 365
    sessions_days: int = 90
    knowledge_days: int = 30
    replay_days: int = 1  # the replay window (replay_ttl_s) in whole days, rounded up
    batch: int = 1000

    def targets(self) -> tuple[tuple[RetentionTarget, int], ...]:
        # Replays first: a dry run then counts what the run does (an old manifest's stored
        # response is cleared, then the manifest goes).
        return (("replays", self.replay_days), ("manifests", self.manifests_days),
                ("audit_log", self.audit_days), ("sessions", self.sessions_days),
                ("knowledge", self.knowledge_days))


@dataclass(slots=True)
class RetentionReport:
    dry_run: bool
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RETENTION_TABLES, 0))
    tenants: int = 0
    batches: int = 0
    failed_tenants: list[str] = field(default_factory=list)
    skipped: bool = False  # another process's run was in progress: this one did nothing
    duration_s: float = 0.0

    def add(self, rows: dict[str, int]) -> None:
        for table, n in rows.items():
            self.rows[table] = self.rows.get(table, 0) + n


class RetentionService:
    def __init__(self, store: RetentionStore, cache: SessionCache, policy: RetentionPolicy,
                 *, metrics: Metrics | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._store = store
        self._cache = cache
        self._policy = policy
        self._metrics = metrics
        self._clock = clock
        self._wall = wall

    async def run(self, *, dry_run: bool = False, tenant_ids: Sequence[str] | None = None
                  ) -> RetentionReport:
        """One pass over every tenant, or over ``tenant_ids`` only."""
        started = self._clock()
        report = RetentionReport(dry_run=dry_run)
        async with self._store.exclusive() as mine:
            if not mine:
                report.skipped = True
                return report
            await self._run(report, tenant_ids)
        report.duration_s = self._clock() - started
        if not dry_run and self._metrics is not None:
            self._metrics.retention_last_run.set(self._wall())
            self._metrics.retention_duration.set(report.duration_s)
        return report

    async def _run(self, report: RetentionReport, tenant_ids: Sequence[str] | None) -> None:
        dry_run = report.dry_run
        tenants = await self._store.tenants() if tenant_ids is None else tenant_ids
        for tenant_id in tenants:
            report.tenants += 1
            try:
                for target, days in self._policy.targets():
                    if dry_run:
                        report.add(await self._store.count(
                            tenant_id=tenant_id, target=target, older_than_days=days))
                    else:
                        await self._prune(report, tenant_id, target, days)
            except Exception:
                log.exception("retention failed for tenant %s; the next run retries it",
                              tenant_id)
                report.failed_tenants.append(tenant_id)

    async def _prune(self, report: RetentionReport, tenant_id: str, target: RetentionTarget,
                     days: int) -> None:
        while True:
            batch = await self._store.prune(tenant_id=tenant_id, target=target,
                                            older_than_days=days,
                                            max_rows=self._policy.batch)
            report.batches += 1
            report.add(batch.rows)
            if self._metrics is not None:
                for table, n in batch.rows.items():
                    if n:
                        self._metrics.retention_pruned.labels(table=table).inc(n)
            for session_id in batch.session_ids:
                await self._drop_cached(tenant_id, session_id)
            if not next(iter(batch.rows.values()), 0):
                return
            await asyncio.sleep(0)  # let turns in between: a run is many short batches

    async def _drop_cached(self, tenant_id: str, session_id: str) -> None:
        try:
            await self._cache.drop(tenant_id=tenant_id, session_id=session_id)
        except Exception:
            log.warning("retention: the cached keys of a pruned session could not be "
                        "dropped; they expire on their TTL", exc_info=True)


class RetentionWorker(Poller):
    """Runs retention every ``interval_s`` (the first run at start)."""

    def __init__(self, service: RetentionService, *, interval_s: float) -> None:
        super().__init__(service.run, interval_s=interval_s, name="ctxgate-retention")
