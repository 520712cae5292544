"""A read replica for the turn's read-only transaction, within a lag bound, reading its writes.

Contract (docs/scaling.md, "Read replicas"):
- ``ReplicaReads.shared_reads(tenant_id, settings)`` is ``Database.shared_reads`` opened on
  the replica when it may serve the turn, else on the primary. Only that block moves: every
  write, and every read outside a turn's block, stays on the primary's ``Database``.
- Lag bound: the replica may serve while it has replayed everything the primary had written
  ``max_lag_s`` ago. A probe, at most every ``probe_interval_s`` and shared by the turns
  that find it due, reads the primary's WAL position and then the replica's replay position;
  the newest primary sample the replica has replayed dates its data. An idle primary writes
  no WAL, so its replica stays fresh (``pg_last_xact_replay_timestamp`` would age instead),
  and a replica that stopped replaying ages from its last sample on.
- Read-your-writes: each write of a tenant raises its fence to the primary's WAL position
  past the commit (``Database.fenced`` -> ``fence``, kept in ``RedisWalFences``). A turn reads
  the replica only when the replica's replay position is at or past the tenant's fence
  (re-read once from the replica when the probe's is behind). A fence that cannot be read
  sends the turn to the primary. A fence that cannot be written (Redis down, or the
  position lost after the commit) makes the write wait out the lag bound before it answers:
  by then any replica that may serve has it.
- A replica that does not answer within ``probe_timeout_s``, is not in recovery, or fails to
  open the block sends the turn to the primary. Each choice is counted per ``reason``
  (``routed``; metric ``ctxgate_replica_reads``) and each change of the replica's state is
  logged once (WARNING when it stops serving, INFO when it serves again); the turn's answer
  is the same either way, so its manifest says nothing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from app.adapters.faults import dependency_of
from app.adapters.postgres.db import NO_SETTINGS, Database, StoreBusy

log = logging.getLogger(__name__)

REPLAYED = "SELECT pg_last_wal_replay_lsn() - '0/0'"  # NULL when not in recovery
# The primary's samples: the end of the last record flushed, as the replay position is the
# end of the last record replayed (the insert position may point past a page header, which
# an idle primary's replica would never reach). A fence uses the insert position (``WAL_END``):
# past the commit even with synchronous_commit off.
FLUSHED = "SELECT pg_current_wal_flush_lsn() - '0/0'"
# Why a turn's reads went where they did: the replica, or the primary because of ...
REASONS = ("replica", "lagging", "unreachable", "behind-write", "fence-unknown")
# Primary samples older than this many lag bounds date nothing a fresh replica could need.
KEEP_BOUNDS = 4


class WalFences(Protocol):
    """What ``ReplicaReads`` needs of the fence store (``RedisWalFences``)."""

    async def raise_to(self, tenant_id: str, lsn: int) -> None: ...

    async def get(self, tenant_id: str) -> int | None: ...


def _down(exc: Exception) -> bool:
    """Whether ``exc`` says a PostgreSQL server is not answering (not a bug to raise)."""
    return isinstance(exc, TimeoutError | StoreBusy) or dependency_of(exc) == "postgres"


@dataclass(frozen=True, slots=True)
class _Probe:
    fresh_at: float  # monotonic time the replica's data is current to (-inf: unknown)
    replayed: int | None  # the replica's replay position then (None: it did not answer)


_UNREACHABLE = _Probe(-math.inf, None)


class ReplicaReads:
    def __init__(self, primary: Database, replica: Database, fences: WalFences, *,
                 max_lag_s: float, probe_interval_s: float | None = None,
                 probe_timeout_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if max_lag_s <= 0:
            raise ValueError("max_lag_s must be > 0")
        self.primary = primary
        self.replica = replica
        self._fences = fences
        self.max_lag_s = max_lag_s
        # The probe's age adds to the measured lag: probe well inside the bound.
        self._interval = probe_interval_s if probe_interval_s is not None else max_lag_s / 4
        self._timeout = probe_timeout_s if probe_timeout_s is not None else min(0.5, max_lag_s)
        self._clock = clock
        self._sleep = sleep
        self._samples: deque[tuple[float, int]] = deque()  # (time, primary WAL position)
        self._probe = _UNREACHABLE
        self._probed_at = float("-inf")
        self._probing: asyncio.Future[_Probe] | None = None
        self._serving: bool | None = None  # the last state logged
        self.routed: Counter[str] = Counter(dict.fromkeys(REASONS, 0))
        self.fence_failures = 0
        primary.fenced(self.fence)

    async def fence(self, tenant_id: str, lsn: int | None) -> None:
        """``Database.fenced``'s hook: raise the tenant's fence to ``lsn``; when that cannot
        be done, hold the write's answer for the lag bound (see the module docstring)."""
        if lsn is not None:
            try:
                await self._fences.raise_to(tenant_id, lsn)
                return
            except Exception as exc:  # any failure: the wait below covers it
                log.warning("read-your-writes fence not recorded (%s): the write waits out "
                            "the replica lag bound", type(exc).__name__)
        self.fence_failures += 1
        await self._sleep(self.max_lag_s)

    @asynccontextmanager
    async def shared_reads(self, tenant_id: str, settings: Mapping[str, str] = NO_SETTINGS
                           ) -> AsyncIterator[None]:
        """``Database.shared_reads`` on the replica when it may serve ``tenant_id``'s turn
        now, else on the primary."""
        reason = await self._choose(tenant_id)
        async with AsyncExitStack() as stack:
            if reason == "replica":
                try:
                    await stack.enter_async_context(
                        self.replica.shared_reads(tenant_id, settings))
                except Exception as exc:
                    if not _down(exc):
                        raise
                    reason = "unreachable"
                    self._lost(exc)
            if reason != "replica":
                await stack.enter_async_context(self.primary.shared_reads(tenant_id, settings))
            self.routed[reason] += 1
            self._log(reason)
            yield

    async def _choose(self, tenant_id: str) -> str:
        probe = await self._current()
        if probe.replayed is None:
            return "unreachable"
        if self._clock() - probe.fresh_at > self.max_lag_s:
            return "lagging"
        try:
            fence = await self._fences.get(tenant_id)
        except Exception:  # unknown fence: only the primary is safe
            return "fence-unknown"
        if fence is None or fence <= probe.replayed:
            return "replica"
        try:  # the write may have been replayed since the probe: ask the replica once
            async with asyncio.timeout(self._timeout):
                async with self.replica.connection() as conn:
                    replayed = await conn.raw.fetchval(REPLAYED)
        except Exception as exc:
            if not _down(exc):
                raise
            self._lost(exc)
            return "unreachable"
        return "replica" if replayed is not None and int(replayed) >= fence else "behind-write"

    async def _current(self) -> _Probe:
        """The latest probe, run again (once for every turn waiting) when it is due."""
        if self._clock() - self._probed_at < self._interval:
            return self._probe
        if self._probing is None:
            self._probing = asyncio.ensure_future(self._run_probe())
        probing = self._probing
        try:
            return await asyncio.shield(probing)
        finally:
            if self._probing is probing and probing.done():
                self._probing = None

    async def _run_probe(self) -> _Probe:
        now = self._clock()
        try:
            async with asyncio.timeout(self._timeout):
                async with self.primary.connection() as conn:
                    self._samples.append((now, int(await conn.raw.fetchval(FLUSHED))))
                async with self.replica.connection() as conn:
                    replayed = await conn.raw.fetchval(REPLAYED)
        except Exception as exc:
            if not _down(exc):
                raise
            self._lost(exc)
            probe = _UNREACHABLE
        else:
            while self._samples and self._samples[0][0] < now - KEEP_BOUNDS * self.max_lag_s:
                self._samples.popleft()
            # Not in recovery (promoted, or the primary itself): not a replica to read.
            probe = _UNREACHABLE if replayed is None else _Probe(
                max((t for t, lsn in self._samples if lsn <= int(replayed)),
                    default=-math.inf), int(replayed))
        self._probe, self._probed_at = probe, self._clock()
        return probe

    def _lost(self, exc: BaseException) -> None:
        log.debug("replica unreachable: %s", type(exc).__name__)
        # The next turn probes again, after the interval: a replica that hangs costs each
        # probe its timeout, not every turn.
        self._probe, self._probed_at = _UNREACHABLE, self._clock()

    def _log(self, reason: str) -> None:
        serving = reason == "replica"
        if serving == self._serving or reason in ("behind-write", "fence-unknown"):
            return  # (a turn right after its tenant's write says nothing of the replica)
        self._serving = serving
        if serving:
            log.info("read replica serving turn reads again")
        else:
            log.warning("read replica not serving turn reads (%s): reading the primary",
                        reason)

    async def close(self) -> None:
        if self._probing is not None:
            self._probing.cancel()
        await self.replica.close()
