"""Turns on a real streaming read replica (tests/replica.py: a primary and a ``pg_basebackup
-R`` hot standby from the embedded binaries, on loopback), through the API.

- Within the lag bound a turn's reads run on the replica: with replay paused and a document
  deleted on the primary behind the service's back, the next turn still finds it (the read
  was the replica's); once the pause outlasts ``replica_max_lag_s`` a turn reads the primary
  (the document is gone), counted as ``lagging`` in ``ctxgate_replica_reads`` and logged.
- Read-your-writes: with replay paused, a document ingested through the API is in the very
  next turn (the tenant's fence is past the replica: ``behind-write``, the primary); once
  replay resumes, turns go back to the replica and still find it.
- A stopped replica: turns answer 200 from the primary (``unreachable``), and say so.

Writes (ingest, each turn's manifest) succeed throughout: they never leave the primary, and
the standby would refuse them. Skipped when the embedded install lacks a binary it needs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from app.main import Container, create_app
from app.settings import Settings
from tests.api.conftest import bearer
from tests.api.seed import ingest, turn
from tests.replica import Pair, missing_binaries, streaming_pair

pytestmark = pytest.mark.skipif(
    bool(missing_binaries()),
    reason=f"the embedded PostgreSQL lacks {', '.join(missing_binaries())}")

LAG_S = 3.0  # wide: a loaded machine's turn must fit inside it
RUNBOOK = ("Refund calls time out after 30 seconds because RetryConfig caps the retries at "
           "three; the payments gateway answers slowly under load.")
FOLLOW_UP = ("Refund timeouts since the gateway upgrade: RetryConfig now caps retries at "
             "five, and the refund call times out after 45 seconds.")


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with streaming_pair() as p:
        yield p


@dataclass
class App:
    container: Container
    client: httpx.AsyncClient
    key: str
    pair: Pair

    async def turn(self) -> str:
        r = await self.client.post("/v1/context", headers=bearer(self.key), json=turn())
        assert r.status_code == 200, r.text
        return " ".join(s["content"] for s in r.json()["envelope"]["segments"])

    def routed(self, reason: str) -> int:
        return self.reasons()[reason]

    def reasons(self) -> dict[str, int]:
        assert self.container.replica is not None
        return dict(self.container.replica.routed)

    async def caught_up(self) -> None:
        """Until the standby has replayed all the primary has inserted, so every fence too
        (bounded: WAL not flushed by a commit, such as a read's page pruning, is flushed by
        the WAL writer within wal_writer_delay)."""
        primary = await asyncpg.connect(self.pair.primary.url())
        standby = await asyncpg.connect(self.pair.standby.url())
        try:
            target = await primary.fetchval("SELECT pg_current_wal_insert_lsn()")
            deadline = time.monotonic() + 20
            while await standby.fetchval("SELECT pg_last_wal_replay_lsn() < $1", target):
                assert time.monotonic() < deadline, "standby never caught up"
                await asyncio.sleep(0.02)
        finally:
            await primary.close()
            await standby.close()

    async def replay(self, on: bool) -> None:
        """Resume replay, or pause it and wait until it is paused (a pause is a request: the
        startup process may replay on for a moment)."""
        standby = await asyncpg.connect(self.pair.standby.url())
        try:
            if on:
                await standby.execute("SELECT pg_wal_replay_resume()")
                return
            await standby.execute("SELECT pg_wal_replay_pause()")
            deadline = time.monotonic() + 10
            while await standby.fetchval("SELECT pg_get_wal_replay_pause_state()") != "paused":
                assert time.monotonic() < deadline, "replay never paused"
                await asyncio.sleep(0.01)
        finally:
            await standby.close()


@pytest.fixture
async def app(pair: Pair, redis_url: str, uid: str, tenant: str) -> AsyncIterator[App]:
    settings = Settings(
        database_url=pair.owner_url, replica_database_url=pair.replica_app_url(),
        replica_max_lag_s=LAG_S, redis_url=redis_url, redis_prefix=f"ctxgate-test-{uid}",
        admin_token="test-admin-token-" + uid)
    container = await Container.open(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(container=container))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            r = await client.post("/v1/admin/keys", headers={
                "Authorization": f"Bearer test-admin-token-{uid}"}, json={
                "tenant_id": tenant, "role": "runtime", "max_data_level": "internal"})
            assert r.status_code == 201, r.text
            yield App(container, client, str(r.json()["api_key"]), pair)
    finally:
        await container.close()


async def test_turns_read_the_replica_within_the_lag_bound_then_the_primary(
        app: App, tenant: str, caplog: pytest.LogCaptureFixture) -> None:
    await app.turn()  # warm: a first embedding may take seconds, and the bound is 3 s
    await ingest(app.client, app.key, "runbook", RUNBOOK)
    await app.caught_up()
    assert "RetryConfig caps the retries at three" in await app.turn()
    assert app.routed("replica") == 2
    await app.caught_up()  # the turn's own manifest too: the fence is replayed
    await app.replay(False)
    try:
        primary = await asyncpg.connect(app.pair.primary.url())
        try:  # behind the service's back: no fence is raised
            await primary.execute("DELETE FROM knowledge_documents WHERE tenant_id = $1",
                                  tenant)
        finally:
            await primary.close()
        assert "RetryConfig caps the retries at three" in await app.turn()  # the replica's
        assert app.routed("replica") == 3
        await asyncio.sleep(LAG_S + 0.5)
        with caplog.at_level(logging.WARNING, logger="app.adapters.postgres.replica"):
            assert "RetryConfig caps the retries at three" not in await app.turn()
        assert app.routed("lagging") == 1
        assert "not serving turn reads (lagging)" in caplog.text
        metrics = (await app.client.get("/metrics")).text
        assert 'ctxgate_replica_reads_total{reason="lagging"} 1.0' in metrics, metrics
    finally:
        await app.replay(True)
    await app.caught_up()
    await asyncio.sleep(LAG_S / 4)  # the next probe sees it
    await app.turn()
    assert app.routed("replica") == 4


async def test_a_tenant_reads_its_own_write_while_the_replica_is_behind(app: App) -> None:
    await app.caught_up()
    await app.turn()  # the first probe, replayed and fresh
    await app.replay(False)
    try:
        await ingest(app.client, app.key, "follow-up", FOLLOW_UP)
        assert "caps retries at five" in await app.turn()
        assert app.routed("behind-write") == 1, app.reasons()
        assert app.routed("lagging") == app.routed("unreachable") == 0
    finally:
        await app.replay(True)
    await app.caught_up()
    assert "caps retries at five" in await app.turn()
    assert app.routed("replica") == 2


async def test_a_stopped_replica_falls_back_to_the_primary_and_says_so(
        app: App, caplog: pytest.LogCaptureFixture) -> None:
    """Last in the module: the standby stays stopped."""
    await ingest(app.client, app.key, "runbook", RUNBOOK)
    await app.caught_up()
    await app.turn()
    assert app.routed("replica") == 1
    app.pair.standby.stop()
    with caplog.at_level(logging.WARNING, logger="app.adapters.postgres.replica"):
        for _ in range(2):
            assert "RetryConfig caps the retries at three" in await app.turn()
            await asyncio.sleep(LAG_S / 4)
    assert app.routed("unreachable") == 2
    assert "not serving turn reads (unreachable)" in caplog.text
