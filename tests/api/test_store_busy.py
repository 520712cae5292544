"""An exhausted database pool is a retryable 503 problem, the pool recovers, and it reports
its checkouts, waiters and timeouts (ctxgate_db_pool_*)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from app.adapters.postgres.db import Database, PoolStats, Sql, StoreBusy
from app.api import errors


async def test_pool_exhaustion_is_503_store_busy_and_the_pool_recovers(
        pg_owner_url: str) -> None:
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=1,
                             pool_timeout=0.2)
    app = FastAPI()
    errors.install(app)

    @app.get("/nested")
    async def nested() -> dict[str, int]:
        async with db.tenant_tx("t"), db.tenant_tx("t"):  # the one connection is taken
            return {"unreachable": 1}

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            r = await client.get("/nested")
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.headers["retry-after"] == "1"
        assert r.json()["type"] == "store-busy"
        async with db.tenant_tx("t") as conn:  # the held connection went back, clean
            assert await conn.fetchval(Sql("SELECT 1")) == 1
    finally:
        await db.close()


async def test_pool_stats_count_checkouts_waiters_and_timeouts(pg_owner_url: str) -> None:
    """What ctxgate_db_pool_* report: asyncpg counts neither waiters nor their timeouts."""
    # The waiter's bound outlasts a loaded machine's scheduling, so it is seen waiting
    # before it times out; it is polled for rather than given a fixed head start.
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=1,
                             pool_timeout=2.0)
    try:
        assert db.pool_stats() == PoolStats(max_size=1, open=0, in_use=0, waiting=0,
                                            timeouts=0)
        async with db.tenant_tx("t"):
            waiter = asyncio.create_task(_one(db))
            for _ in range(100):
                await asyncio.sleep(0.01)
                if db.pool_stats().waiting:
                    break
            assert db.pool_stats() == PoolStats(max_size=1, open=1, in_use=1, waiting=1,
                                                timeouts=0)
            with pytest.raises(StoreBusy):
                await waiter
        assert db.pool_stats() == PoolStats(max_size=1, open=1, in_use=0, waiting=0,
                                            timeouts=1)
    finally:
        await db.close()


async def _one(db: Database) -> None:
    async with db.tenant_tx("t") as conn:
        await conn.fetchval(Sql("SELECT 1"))
