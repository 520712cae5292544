"""Knowledge ingest off the request path: a large document becomes a durable job.

``submit`` keeps the request path for what is quick -- a document given as the client's
chunks (already embedded) or a text within ``sync_chunks`` chunks' worth of tokens -- and
ingests it at once (the chunk count: 201). Any other text is stored as a ``pending`` job
(``IngestJobStore``) and the worker is kicked (the job: 202). Validation and permission
checks happen before either, so bad input never becomes a job.

The worker (``IngestWorker``, a ``Poller``) claims due jobs, at most ``jobs_max`` at once per
process, each as a background task: ``KnowledgeService.ingest_paced`` chunks the text off the
event loop and embeds ``batch`` chunks per model call; after each batch the job records its
progress (which also renews its lease: a batch must take less than ``lease_s``) and rests
by the ``DutyCycle``, so turns keep most of the CPU the model shares with them. The version
is written in one transaction at the end, as a synchronous ingest writes it: a search sees
the old version or the new one, never part of one. A worker killed mid-job leaves it
``running``; once the lease (``lease_s``) lapses any worker claims it again and starts over
-- rewriting a version is idempotent -- and a worker that lost its lease can no longer
change the job (its writes are fenced by attempt).

A failed attempt (the embedder down, the database restarting) puts the job back to
``pending`` with its error and a retry time (``RETRY_BASE_S`` doubling to ``RETRY_MAX_S``);
after ``attempts_max`` attempts it is ``failed``. Ended jobs drop the document they held at
once and their rows after ``retention_s``. See docs/ingest.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial

from app.core.errors import NotFound
from app.core.model import Principal
from app.ports import ClaimedIngest, ClientChunk, IngestJob, IngestJobStore, NewDocument
from app.service.background import KeyedJobs, Poller
from app.service.knowledge import KnowledgeService, bounds
from app.service.pacing import DutyCycle

log = logging.getLogger(__name__)

RETRY_BASE_S = 2.0
RETRY_MAX_S = 300.0
PURGE_EVERY_S = 300.0  # how often a worker deletes ended jobs past retention


def retry_delay(attempts: int) -> float:
    """Seconds before a failed attempt's job is due again."""
    return float(min(RETRY_MAX_S, RETRY_BASE_S * 2.0 ** max(0, attempts - 1)))


class IngestService:
    def __init__(self, store: IngestJobStore, knowledge: KnowledgeService, *,
                 sync_chunks: int = 4, batch: int = 16, jobs_max: int = 1,
                 pace: DutyCycle | None = None, attempts_max: int = 6, lease_s: float = 120.0,
                 retention_s: float = 86_400.0,
                 timer: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._knowledge = knowledge
        self._sync_chunks = sync_chunks
        self._batch = batch
        self._jobs_max = jobs_max
        self._pace = pace or DutyCycle(duty=0.5, min_pause_s=0.05)
        self._attempts_max = attempts_max
        self._lease_s = lease_s
        self._retention_s = retention_s
        self._timer = timer
        self._purged = float("-inf")
        self._running: KeyedJobs[tuple[str, str], None] = KeyedJobs(limit=jobs_max,
                                                                    name="ingest")
        self.kick: Callable[[], None] = lambda: None  # IngestWorker sets its own

    async def submit(self, *, tenant_id: str, document: NewDocument,
                     content: str | Sequence[ClientChunk]) -> int | IngestJob:
        """The chunk count of a document ingested now, or the job that will ingest it."""
        if not isinstance(content, str) or self._knowledge.is_small(
                content, max_chunks=self._sync_chunks):
            return await self._knowledge.ingest(tenant_id=tenant_id, document=document,
                                                content=content)
        job = await self._store.create(tenant_id=tenant_id, document=document, text=content)
        self.kick()
        return job

    async def get(self, *, principal: Principal, job_id: str) -> IngestJob:
        # A job of a document the key could not read is absent, as the document would be.
        job = await self._store.get(tenant_id=principal.tenant_id, job_id=job_id,
                                    bounds=bounds(principal))
        if job is None:
            raise NotFound("ingest job not found")
        return job

    async def run_open(self) -> int:
        """Start due jobs up to the concurrency bound (and purge ended ones now and then);
        returns how many were started."""
        if self._timer() - self._purged >= PURGE_EVERY_S:
            self._purged = self._timer()
            await self._store.purge(older_than_s=self._retention_s)
        free = self._jobs_max - len(self._running)
        if free <= 0:
            return 0
        started = 0
        for tenant_id, job_id in await self._store.open_jobs(limit=free):
            key = (tenant_id, job_id)
            if self._running.running(key) is None and self._running.start(
                    key, partial(self._run_then_kick, tenant_id, job_id)) is not None:
                started += 1
        return started

    async def _run_then_kick(self, tenant_id: str, job_id: str) -> None:
        try:
            await self.run(tenant_id=tenant_id, job_id=job_id)
        finally:
            self.kick()  # a slot is free: the next due job need not wait for the poll

    async def run(self, *, tenant_id: str, job_id: str) -> bool:
        """Claim and run one job to its end or its next retry; False if it was not due."""
        claimed = await self._store.claim(tenant_id=tenant_id, job_id=job_id,
                                          lease_s=self._lease_s)
        if claimed is None:
            return False
        job = claimed.job
        try:
            chunks = await self._ingest(claimed)
        except LeaseLost:
            log.warning("ingest job %s: claimed by another worker meanwhile", job_id)
            return True
        except Exception as exc:
            error = f"attempt {job.attempts} failed: {type(exc).__name__}"
            log.warning("ingest job %s %s", job_id, error, exc_info=True)
            if job.attempts >= self._attempts_max:
                await self._store.end(job=job, chunks=None, error=error)
            else:
                await self._store.retry(job=job, error=f"{error}; retrying",
                                        delay_s=retry_delay(job.attempts))
            return True
        await self._store.end(job=job, chunks=chunks, error=None)
        return True

    async def _ingest(self, claimed: ClaimedIngest) -> int:
        job = claimed.job

        async def progress(done: int, total: int) -> None:
            if not await self._store.progress(job=job, done=done, total=total,
                                              lease_s=self._lease_s):
                raise LeaseLost

        return await self._knowledge.ingest_paced(
            tenant_id=job.tenant_id, document=claimed.document, text=claimed.text,
            batch=self._batch, pace=self._pace, progress=progress)

    async def aclose(self) -> None:
        await self._running.close()


class LeaseLost(Exception):
    """The job was claimed again (this worker's lease lapsed): stop without writing."""


class IngestWorker(Poller):
    """An asyncio task that starts due ingest jobs: every ``interval_s``, or at once on kick."""

    def __init__(self, service: IngestService, *, interval_s: float = 1.0) -> None:
        super().__init__(service.run_open, interval_s=interval_s, name="ctxgate-ingest-worker")
        service.kick = self.kick
