"""Re-embedding in the background after the configured embedder changed.

Contract: ``ReEmbedder.start()`` returns at once; one background job then finds, through the
store's census, every (table, tenant) with *stale* rows (vectors another server model made,
``app.core.embedding_space``) and re-embeds them with the configured embedder, ``batch`` rows
at a time. A turn never waits on it: the model call runs off the event loop like any other,
and each batch's read and write are short transactions of the job's own, one at a time, in
the tenant's RLS scope. It is paced so that turns keep most of the CPU the model shares with
them: after a batch that took ``t`` it pauses ``max(pause_s, t * (1 - duty) / duty)``, so the
job is busy at most ``duty`` of the time (measured in docs/embeddings.md). Until a row is
re-embedded a vector search skips it (it lives in another space); full-text still finds it.

Durable without a queue: progress is the rows themselves, so a restart runs the census again
and carries on. One worker at a time does the work (``EmbeddingStore.exclusive``: the others
return at once). The job stops early when a worker started since has recorded another
embedder (a rolling deploy: the older worker must not undo the newer one's work). A failure
(the embedder down, the database restarting) ends the pass with a log, and the job tries
again after ``retry_s``.

A client's vectors are never re-embedded (the server does not know the client's model): after
a switch they are ``client_stale``, out of vector search until their client sends them again.
``status()`` is the census plus the job's state (``GET /v1/admin/embeddings``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.core.embedding_space import PROVENANCES, EmbeddingSpace, Provenance
from app.observability import Metrics
from app.ports import Embedder, EmbeddingStore
from app.service.background import KeyedJobs
from app.service.pacing import DutyCycle

log = logging.getLogger(__name__)

_JOB = "reembed"


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingStatus:
    embedder: str  # the configured embedder's id
    legacy: str  # what a row without provenance is taken to be made by
    running: bool  # this worker's re-embedding job is in flight
    tables: dict[str, dict[Provenance, int]]  # rows per table and provenance, all tenants


class ReEmbedder:
    def __init__(self, *, store: EmbeddingStore, embedder: Embedder, space: EmbeddingSpace,
                 batch: int = 16, pause_s: float = 0.05, duty: float = 0.5,
                 retry_s: float = 60.0, metrics: Metrics | None = None,
                 timer: Callable[[], float] = time.monotonic) -> None:
        if embedder.model != space.current:
            raise ValueError("the re-embedder's embedder must be the space's current one")
        self._store = store
        self._embedder = embedder
        self._space = space
        self._batch = batch
        self._pacing = DutyCycle(duty=duty, min_pause_s=pause_s, timer=timer)
        self._retry_s = retry_s
        self._metrics = metrics
        self._jobs: KeyedJobs[str, None] = KeyedJobs(limit=1, name="reembed")

    @property
    def space(self) -> EmbeddingSpace:
        return self._space

    @property
    def running(self) -> bool:
        return self._jobs.running(_JOB) is not None

    def start(self) -> None:
        """Start the job unless it is in flight."""
        self._jobs.start(_JOB, self._run)

    async def idle(self) -> None:
        """Wait until the job has finished (tests)."""
        while (job := self._jobs.running(_JOB)) is not None:
            await asyncio.shield(job)

    async def aclose(self) -> None:
        await self._jobs.close()

    async def status(self, tenant_id: str | None = None) -> EmbeddingStatus:
        """Rows per table and provenance, of every tenant or of ``tenant_id`` (what a caller
        waiting for its own writes to be embedded reads: another tenant's backlog, e.g. of
        an embedder no longer configured, is not its wait)."""
        tables: dict[str, dict[Provenance, int]] = {
            t: dict.fromkeys(PROVENANCES, 0) for t in self._store.tables}
        for c in await self._store.census(space=self._space):
            if tenant_id is None or c.tenant_id == tenant_id:
                tables[c.table][c.provenance] += c.rows
        return EmbeddingStatus(embedder=self._space.current, legacy=self._space.legacy,
                               running=self.running, tables=tables)

    async def _run(self) -> None:
        if self._metrics is not None:
            self._metrics.reembed_jobs.inc()
        try:
            while True:
                try:
                    async with self._store.exclusive() as mine:
                        if mine:
                            await self._pass()
                    return
                except Exception:
                    log.warning("re-embedding failed; retrying in %s s", self._retry_s,
                                exc_info=True)
                await asyncio.sleep(self._retry_s)
        finally:
            if self._metrics is not None:
                self._metrics.reembed_jobs.dec()

    async def _pass(self) -> None:
        todo = sorted({(c.table, c.tenant_id) for c in await self._store.census(
            space=self._space) if c.provenance == "stale"})
        if todo:
            log.info("re-embedding stale vectors with %s: %d table/tenant pairs",
                     self._space.current, len(todo))
        for table, tenant_id in todo:
            while True:
                if await self._store.configured() != self._space.current:
                    log.info("another embedder was configured since this worker started; "
                             "leaving the re-embedding to it")
                    return
                # Turns first: the model's CPU is theirs for most of the time.
                async with self._pacing.step():
                    more = await self._batch_of(table, tenant_id)
                if not more:
                    break

    async def _batch_of(self, table: str, tenant_id: str) -> bool:
        """Re-embed one batch of the tenant's stale rows; whether more may be left."""
        rows = await self._store.stale(table=table, tenant_id=tenant_id, space=self._space,
                                       limit=self._batch)
        if not rows:
            return False
        vectors = await self._embedder.embed_passages([r.text for r in rows])
        done = await self._store.replace(table=table, tenant_id=tenant_id, space=self._space,
                                         rows=list(zip(rows, vectors, strict=True)))
        if self._metrics is not None:
            self._metrics.reembedded_rows.labels(table=table).inc(done)
        # None stored: every row changed meanwhile; the next pass (a restart) sees them anew
        # rather than this one spinning on a row it cannot settle.
        return done > 0 and len(rows) == self._batch
