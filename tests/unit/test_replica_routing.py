"""Where ``ReplicaReads`` sends a turn's reads, on fake servers and a fake clock: the lag is
dated by the primary's samples (an idle primary's replica stays fresh, a paused one ages from
its last replayed sample), a tenant's fence keeps its turns on the primary until the replica
has it, an unreadable fence or a silent replica means the primary, an unwritable fence makes
the write wait out the bound, and a bug is raised, not taken for a fault. The real streaming
replica is tests/integration/test_read_replica.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import asyncpg
import pytest

from app.adapters.postgres.db import Database, Fence
from app.adapters.postgres.replica import FLUSHED, REPLAYED, ReplicaReads

LAG = 1.0


@dataclass
class FakeDb:
    """What ``ReplicaReads`` uses of a ``Database``: one-statement connections answering
    ``value`` (or raising it), shared-read blocks it records."""

    value: Any = 0
    blocks: int = 0
    fence: Fence | None = None
    asked: list[str] = field(default_factory=list)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        yield self

    @property
    def raw(self) -> FakeDb:
        return self

    async def fetchval(self, sql: str) -> Any:
        self.asked.append(sql)
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value

    @asynccontextmanager
    async def shared_reads(self, tenant_id: str, settings: Mapping[str, str]
                           ) -> AsyncIterator[None]:
        self.blocks += 1
        yield

    def fenced(self, fence: Fence) -> None:
        self.fence = fence


@dataclass
class FakeFences:
    at: dict[str, int] = field(default_factory=dict)
    down: bool = False

    async def raise_to(self, tenant_id: str, lsn: int) -> None:
        if self.down:
            raise ConnectionError("redis down")
        self.at[tenant_id] = max(lsn, self.at.get(tenant_id, -1))

    async def get(self, tenant_id: str) -> int | None:
        if self.down:
            raise ConnectionError("redis down")
        return self.at.get(tenant_id)


@dataclass
class Setup:
    primary: FakeDb
    replica: FakeDb
    fences: FakeFences
    reads: ReplicaReads
    now: list[float]
    slept: list[float]

    async def turn(self, tenant: str = "t1") -> str:
        before = dict(self.reads.routed)
        async with self.reads.shared_reads(tenant, {}):
            pass
        (reason,) = [r for r, n in self.reads.routed.items() if n != before.get(r, 0)]
        return reason

    def later(self, s: float) -> None:
        self.now[0] += s


@pytest.fixture
def setup() -> Setup:
    primary, replica, fences = FakeDb(100), FakeDb(100), FakeFences()
    now, slept = [1000.0], []

    async def sleep(s: float) -> None:
        slept.append(s)

    reads = ReplicaReads(cast(Database, primary), cast(Database, replica), fences,
                         max_lag_s=LAG, clock=lambda: now[0], sleep=sleep)
    return Setup(primary, replica, fences, reads, now, slept)


async def test_an_idle_primarys_replica_stays_fresh(setup: Setup) -> None:
    for _ in range(10):
        assert await setup.turn() == "replica"
        setup.later(LAG)
    assert FLUSHED in setup.primary.asked and REPLAYED in setup.replica.asked
    assert setup.replica.blocks == 10 and setup.primary.blocks == 0


async def test_a_paused_replica_serves_within_the_bound_then_not(setup: Setup) -> None:
    assert await setup.turn() == "replica"  # sample (t0, 100), replayed 100
    setup.primary.value = 200  # the primary writes on, the replica replays nothing
    setup.later(LAG / 2)
    assert await setup.turn() == "replica"  # dated t0: half the bound old
    setup.later(LAG / 2 + 0.01)
    assert await setup.turn() == "lagging"
    assert setup.primary.blocks == 1
    setup.replica.value = 200  # caught up
    setup.later(LAG / 4)
    assert await setup.turn() == "replica"


async def test_a_tenant_with_a_write_the_replica_lacks_reads_the_primary(
        setup: Setup) -> None:
    assert setup.primary.fence is not None  # installed on the primary's writes
    await setup.primary.fence("t1", 150)
    assert await setup.turn("t1") == "behind-write"
    assert await setup.turn("t2") == "replica"  # another tenant: no fence of its own
    setup.replica.value = 150  # replayed since the probe: asked again, not waited for
    assert await setup.turn("t1") == "replica"


async def test_no_fence_to_read_means_the_primary(setup: Setup) -> None:
    setup.fences.down = True
    assert await setup.turn() == "fence-unknown"


async def test_a_fence_not_written_holds_the_write_for_the_bound(setup: Setup) -> None:
    assert setup.primary.fence is not None
    await setup.primary.fence("t1", 150)
    assert setup.slept == []
    setup.fences.down = True
    await setup.primary.fence("t1", 160)
    await setup.primary.fence("t1", None)  # committed, position lost with the connection
    assert setup.slept == [LAG, LAG]
    assert setup.reads.fence_failures == 2


async def test_a_replica_that_fails_or_left_recovery_is_unreachable(setup: Setup) -> None:
    setup.replica.value = asyncpg.exceptions.ConnectionDoesNotExistError("gone")
    assert await setup.turn() == "unreachable"
    setup.later(LAG / 8)  # within the probe interval: not asked again
    asked = len(setup.replica.asked)
    assert await setup.turn() == "unreachable"
    assert len(setup.replica.asked) == asked
    setup.replica.value = None  # promoted: pg_last_wal_replay_lsn() is NULL
    setup.later(LAG / 4)
    assert await setup.turn() == "unreachable"


async def test_a_bug_is_raised_not_routed_around(setup: Setup) -> None:
    setup.replica.value = ValueError("a bug")
    with pytest.raises(ValueError, match="a bug"):
        await setup.turn()
