"""Session recall in the background: embed appended events, propose the facts they state.

Contract: ``SessionRecall.appended(tenant_id, session_id, owner, events)`` is called after an
append is acknowledged and returns at once; it never fails the append. A single background
job then, session by session (the most recently appended last):

1. embeds the session's events that are not embedded yet (``SessionArchive.unembedded``, in
   batches of ``batch``, paced by a ``DutyCycle`` so turns keep most of the CPU the model
   shares with them), with the server's embedder, recording its model name: a turn
   searches the user's other sessions by meaning over exactly these vectors. An event whose
   embedding failed stays NULL and is retried with that session's next append; until then
   full-text search still finds it.
2. when a ``MemoryService`` is given, turns what the user stated about themselves in the new
   events (``app.core.session_facts``; re-read from the archive, so an erased session proposes
   nothing) into memory *candidates* through the write gate, with
   the event as evidence: the gate decides (duplicate, superseded, rejected, accepted); what
   it rejects leaves no row. Nothing here writes memory directly.

Bounded: at most ``max_pending`` sessions wait; past that, new ones are dropped with a log
(their events are found by words, and embedded with the session's next append).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from app.core.model import DataLevel, Principal, Role, SessionEvent
from app.core.session_facts import FACT_ACTOR, fact_writes
from app.ports import Embedder, SessionArchive, SessionOwner
from app.service.background import KeyedJobs
from app.service.memories import MemoryService
from app.service.pacing import DutyCycle

log = logging.getLogger(__name__)

_JOB = "sessions"


class SessionRecall:
    def __init__(self, *, archive: SessionArchive, embedder: Embedder,
                 memories: MemoryService | None, pacing: DutyCycle, batch: int = 16,
                 max_pending: int = 10_000) -> None:
        self._archive = archive
        self._embedder = embedder
        self._memories = memories
        self._pacing = pacing
        self._batch = batch
        self._max_pending = max_pending
        # (tenant, session) -> the owner and the user's new messages not yet proposed as facts
        self._pending: dict[tuple[str, str], tuple[SessionOwner, list[SessionEvent]]] = {}
        self._jobs: KeyedJobs[str, None] = KeyedJobs(limit=1, name="session-recall")

    @property
    def embedder(self) -> str:
        """The model whose vectors a transcript search compares the query with."""
        return self._embedder.model

    def appended(self, tenant_id: str, session_id: str, owner: SessionOwner,
                 events: Sequence[SessionEvent]) -> None:
        key = (tenant_id, session_id)
        if key not in self._pending and len(self._pending) >= self._max_pending:
            log.warning("session recall queue full; %s will be embedded on its next append",
                        session_id)
            return
        _, said = self._pending.pop(key, (owner, []))
        # Re-inserted: the dict's order is the queue, most recently appended last.
        self._pending[key] = (owner, [*said, *(e for e in events if e.role == "user")])
        self._jobs.start(_JOB, self._drain)

    async def idle(self) -> None:
        """Wait until every appended session has been processed (tests, shutdown)."""
        while (job := self._jobs.running(_JOB)) is not None:
            await asyncio.shield(job)

    async def aclose(self) -> None:
        await self._jobs.close()

    async def _drain(self) -> None:
        while self._pending:
            key = next(iter(self._pending))
            owner, said = self._pending.pop(key)
            try:
                await self._embed(*key)
                if self._memories is not None and said:
                    await self._propose(key[0], key[1], owner, said)
            except Exception:
                log.warning("session recall failed for one session; retried on its next "
                            "append", exc_info=True)

    async def _embed(self, tenant_id: str, session_id: str) -> None:
        while rows := await self._archive.unembedded(
                tenant_id=tenant_id, session_id=session_id, limit=self._batch):
            async with self._pacing.step():  # turns first: they share the model's CPU
                vectors = await self._embedder.embed_passages([text for _, text in rows])
                await self._archive.set_embeddings(
                    tenant_id=tenant_id, session_id=session_id,
                    embeddings=[(seq, v) for (seq, _), v in zip(rows, vectors, strict=True)],
                    embedder=self._embedder.model)
            if len(rows) < self._batch:
                return

    async def _propose(self, tenant_id: str, session_id: str, owner: SessionOwner,
                       said: Sequence[SessionEvent]) -> None:
        assert self._memories is not None
        # What the archive holds now, not the copy queued at append time: a session erased
        # meanwhile ("forget me") must not come back as memories.
        seqs = {e.seq for e in said}
        stored = await self._archive.events(tenant_id=tenant_id, session_id=session_id,
                                            after_seq=min(seqs) - 1,
                                            limit=max(seqs) - min(seqs) + 1)
        writes = fact_writes([e for e in stored if e.seq in seqs], session_id=session_id,
                             user_id=owner.user_id)
        if not writes:
            return
        # The candidates are the user's own words; the gate's actor is this job, not a key.
        actor = Principal(key_id=FACT_ACTOR, tenant_id=tenant_id, role=Role.RUNTIME,
                          max_data_level=DataLevel.INTERNAL, domains=None)
        decisions = await self._memories.write_many(principal=actor, writes=writes)
        log.info("session facts: %s", ", ".join(d.type for d, _ in decisions))
