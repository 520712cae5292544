"""Leases in the ``leases`` table (migration 0022): one holder of a named job at a time,
across every process, through any connection pooler.

The same lease as an ingest job's (``knowledge_jobs``: claimed where it lapsed, extended
while working, on the database's clock), for work that is not a row of its own: the
retention run, the re-embedding runner, one erasure job. Each call is one short
transaction, so no connection is held between them — which is what makes it correct behind
PgBouncer in transaction pooling, where a session-level advisory lock is not.

- ``claim``: inserts the row, or takes it over where it lapsed (``expires_at <= now()``);
  True when ``holder`` holds it now. Two claimants of a free name: the second waits on the
  first's row and then finds it held.
- ``renew``: moves ``expires_at`` on, only while ``holder`` still holds the row; False when
  another has taken it over.
- ``release``: deletes the row if ``holder`` holds it; also deletes rows that lapsed long
  ago (a holder that died), so names of finished jobs do not pile up.
- ``hold(name)``: the three in a block. It yields False at once when another holds the
  name; else True, renews every third of the lease in a task of its own and releases on
  exit. A lease lost meanwhile (this process stalled past the lease and another took over)
  cancels the block, which raises ``LeaseLost``: the work stops instead of running twice.
  A renewal that fails on a store fault is retried at the next tick; the lease lapses if
  none succeeds in time, and the block is then cancelled as above.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.adapters.postgres.db import Database, Sql

# Long enough to ride out a short store fault between renewals; short enough that a dead
# holder's job is taken over soon (the session lock went with the connection at once).
LEASE_TTL_S = 30.0
# Rows of holders that died are deleted by the next release of any lease past this age.
STALE_S = 3600.0

CLAIM = Sql("""
INSERT INTO leases AS l (name, holder, expires_at)
VALUES (:name, :holder, now() + make_interval(secs => :ttl))
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, acquired_at = now(),
    expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= now()
RETURNING l.holder""")
RENEW = Sql("""UPDATE leases SET expires_at = now() + make_interval(secs => :ttl)
WHERE name = :name AND holder = :holder""")
RELEASE = Sql("""DELETE FROM leases WHERE (name = :name AND holder = :holder)
OR expires_at < now() - make_interval(secs => :stale)""")

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another holder took over a lease while this one was still working under it."""


def new_holder() -> str:
    """Who claims: host and pid (for whoever reads the table), and a token of this claim."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"


class PgLeases:
    def __init__(self, db: Database, *, ttl_s: float = LEASE_TTL_S) -> None:
        self._db = db
        self.ttl_s = ttl_s

    async def claim(self, *, name: str, holder: str) -> bool:
        async with self._db.unscoped_tx() as tx:
            got = await tx.fetchval(CLAIM, {"name": name, "holder": holder, "ttl": self.ttl_s})
        return bool(got == holder)

    async def renew(self, *, name: str, holder: str) -> bool:
        async with self._db.unscoped_tx() as tx:
            return await tx.execute(RENEW, {"name": name, "holder": holder,
                                            "ttl": self.ttl_s}) > 0

    async def release(self, *, name: str, holder: str) -> None:
        async with self._db.unscoped_tx() as tx:
            await tx.execute(RELEASE, {"name": name, "holder": holder, "stale": STALE_S})

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[bool]:
        """True for the block when this process holds ``name``; False at once if another
        does. Raises ``LeaseLost`` if the lease is taken over while the block runs."""
        holder = new_holder()
        if not await self.claim(name=name, holder=holder):
            yield False
            return
        task = asyncio.current_task()
        assert task is not None  # an async with runs in a task
        lost = asyncio.Event()
        keeper = asyncio.create_task(self._keep(name, holder, task, lost))
        try:
            yield True
        except asyncio.CancelledError:
            # Ours (the lease was lost) unless the task was also cancelled from outside.
            if lost.is_set() and task.uncancel() == 0:
                raise LeaseLost(name) from None
            raise
        finally:
            keeper.cancel()
            await asyncio.wait([keeper])
            try:
                await self.release(name=name, holder=holder)
            except Exception:  # it lapses on its own; the block's outcome is what matters
                log.warning("lease %s: release failed; it lapses in %s s", name, self.ttl_s,
                            exc_info=True)
        if lost.is_set():  # the block swallowed its cancellation: still not to be trusted
            task.uncancel()
            raise LeaseLost(name)

    async def _keep(self, name: str, holder: str, task: asyncio.Task[object],
                    lost: asyncio.Event) -> None:
        """Renew every third of the lease until cancelled; cancel ``task`` once it is lost."""
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                if await self.renew(name=name, holder=holder):
                    continue
            except Exception:
                log.warning("lease %s: renewal failed; retrying", name, exc_info=True)
                continue
            log.error("lease %s: taken over by another holder; stopping this one's work", name)
            lost.set()
            task.cancel()
            return
