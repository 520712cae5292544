"""The service behind a real PgBouncer in transaction pooling (tests/pgbouncer.py), in front
of the embedded PostgreSQL: two app engines (two containers, as two pods) share two server
connections, and a turn, an erasure, a retention run and a re-embedding all go through it.

What would break there and is checked here: a statement prepared on one server connection
and executed on another (asyncpg's cache is off with ``database_pgbouncer``), a tenant setting
outliving its transaction (it is transaction-local: interleaved tenants never see each
other's), startup parameters PgBouncer refuses (``jit``), and session-level advisory locks
(the background jobs hold leases now: held by one engine, refused to the other).

Runs in a database of its own: the re-embedding is database-wide. Skipped when Debian's
``pgbouncer`` is not installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.adapters.faults import dependency_of
from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.migrate import check_serving
from app.settings import Settings
from tests.api.conftest import bearer
from tests.api.seed import turn
from tests.api.test_reembed import (
    App,
    HashEmbedder,
    _admin,
    _close,
    _counts,
    _open,
    _seed,
    own_db,  # noqa: F401 - a fixture: a migrated database of this test's own
)
from tests.pgbouncer import Bouncer, pgbouncer, pgbouncer_binary

pytestmark = pytest.mark.skipif(
    pgbouncer_binary() is None,
    reason="pgbouncer is not installed (Debian: apt-get install pgbouncer); these tests "
           "need a real one in front of the embedded PostgreSQL")

SETTING = Sql("SELECT current_setting('app.tenant_id', true) AS t, "
              "current_setting('jit') AS jit, :n::int AS n")
LEASES = Sql("SELECT count(*) FROM leases")
SLEEP = Sql("SELECT :n::int FROM pg_sleep(0.05)")


@pytest.fixture
def bouncer(pg_owner_url: str) -> Iterator[Bouncer]:
    # Two server connections for every client of both engines: each transaction may land
    # on either, and a client's next one usually does not find its last one free.
    with pgbouncer(pg_owner_url, pool_size=2) as b:
        yield b


@pytest.fixture
def app_url(own_db: str, bouncer: Bouncer) -> str:  # noqa: F811 - the fixture above
    return f"postgresql+asyncpg://ctxgate_app@{bouncer.address}/{make_url(own_db).database}"


@pytest.fixture
def through(app_url: str, redis_url: str, uid: str) -> Settings:
    """Settings of a pod whose only database URL is PgBouncer's (no owner URL at all)."""
    return Settings(app_database_url=app_url, database_pgbouncer=True, redis_url=redis_url,
                    redis_prefix=f"ctxgate-test-{uid}", admin_token="test-admin-token-" + uid,
                    reembed_batch=2, reembed_pause_ms=0)


@pytest.fixture
async def engines(through: Settings) -> AsyncIterator[tuple[App, App]]:
    """Two containers through PgBouncer; the second's embedder differs (a switch), so it
    has stale vectors to re-embed once the first has written."""
    _, first = await _open(through, HashEmbedder("test-hash-a"))
    try:
        _, second = await _open(through, HashEmbedder("test-hash-b"))
    except BaseException:
        await _close(first)
        raise
    try:
        yield first, second
    finally:
        await _close(second)
        await _close(first)


async def test_a_plain_pool_is_refused_and_the_setting_makes_it_work(app_url: str) -> None:
    plain = await Database.open(app_url, pool_size=1)
    try:
        assert not await plain.ping()  # "unsupported startup parameter: jit"
    finally:
        await plain.close()
    await asyncio.to_thread(check_serving, app_url, pgbouncer=True)


async def test_statements_and_tenants_interleave_on_shared_server_connections(
        app_url: str, uid: str) -> None:
    dbs = [await Database.open(app_url, pool_size=8, pgbouncer=True) for _ in range(2)]
    try:
        async def one(n: int) -> tuple[str | None, str, int]:
            db = dbs[n % 2]
            if n % 3 == 0:  # a statement outside any transaction
                async with db.connection() as conn:
                    row = await conn.one(SETTING, {"n": n})
            else:
                async with db.tenant_tx(f"t{uid}{n % 5}") as tx:
                    await asyncio.sleep(0)  # let the others in while it is open
                    row = await tx.one(SETTING, {"n": n})
            return row.t, row.jit, row.n

        got = await asyncio.gather(*(one(n) for n in range(600)))
    finally:
        for db in dbs:
            await db.close()
    for n, (tenant, jit, echoed) in enumerate(got):
        assert echoed == n
        # Outside a transaction no tenant (NULL, or '' once a transaction has set and
        # dropped it on that server connection); inside, its own and never another's.
        assert (tenant or None) == (None if n % 3 == 0 else f"t{uid}{n % 5}")
        if n % 3:
            assert jit == "off"


async def test_a_turns_shared_reads_hold_one_server_connection(
        pg_owner_url: str, own_db: str, uid: str) -> None:  # noqa: F811
    """Extra read lanes open on idle *client* connections; behind PgBouncer each needs a
    server connection the block's other lanes may be holding. With one server connection a
    second lane would wait for it forever (PgBouncer's query_wait_timeout, then an error)."""
    with pgbouncer(pg_owner_url, pool_size=1) as one:
        url = f"postgresql+asyncpg://ctxgate_app@{one.address}/{make_url(own_db).database}"
        db = await Database.open(url, pool_size=4, read_lanes=4, pgbouncer=True)
        try:
            async def read(n: int) -> int:
                async with db.read_tx(f"t{uid}") as tx:
                    return int(await tx.fetchval(SLEEP, {"n": n}))

            await asyncio.gather(*(read(n) for n in range(4)))  # four idle client connections
            async with asyncio.timeout(10), db.shared_reads(f"t{uid}"):
                assert await asyncio.gather(*(read(n) for n in range(4))) == [0, 1, 2, 3]
        finally:
            await db.close()


async def test_a_taken_pgbouncer_pool_is_a_postgres_fault(
        pg_owner_url: str, own_db: str) -> None:  # noqa: F811
    """A client PgBouncer cannot serve within query_wait_timeout gets an error the one
    classification calls a PostgreSQL fault: a 503 with Retry-After, not a 500."""
    with pgbouncer(pg_owner_url, pool_size=1, query_wait_timeout=1) as one:
        url = f"postgresql+asyncpg://ctxgate_app@{one.address}/{make_url(own_db).database}"
        holder = await Database.open(url, pool_size=1, pgbouncer=True)
        waiter = await Database.open(url, pool_size=1, pgbouncer=True)
        try:
            async with holder.unscoped_tx():  # the only server connection, held
                with pytest.raises(Exception) as caught:  # noqa: PT011 - classified below
                    async with waiter.unscoped_tx() as tx:
                        await tx.fetchval(SLEEP, {"n": 0})
            assert "query_wait_timeout" in str(caught.value)
            assert dependency_of(caught.value) == "postgres"
        finally:
            await waiter.close()
            await holder.close()


async def test_turn_erasure_retention_and_reembedding_through_pgbouncer(
        engines: tuple[App, App], own_db: str, uid: str,  # noqa: F811
        bouncer: Bouncer) -> None:
    first, second = engines
    tenant = f"t{uid}a"
    key = await _seed(first, tenant)
    admin = bearer(await _key(first, tenant, "admin"))

    # Turns on both engines at once, on one session (within the tenant's turn quota).
    bodies = [turn(session_id="s1", turn_id=f"turn-{n}") for n in range(4)]
    answers = await asyncio.gather(*(
        (first if n % 2 else second).http.post("/v1/context", headers=bearer(key), json=b)
        for n, b in enumerate(bodies)))
    assert [r.status_code for r in answers] == [200] * 4, [r.text for r in answers]

    # An erasure requested on one engine; both workers poll: it is run once, and verified.
    await _ok(await first.http.post("/v1/sessions/s-u/events", headers=bearer(key), json={
        "user_id": "user-u", "events": [{"type": "message", "role": "user",
                                         "content": "CANARY my IBAN is DE89 3704"}]}), 201)
    job = await _ok(await second.http.post("/v1/erasures", headers=admin,
                                           json={"user_id": "user-u"}), 202)
    claimed = await asyncio.gather(first.c.erasures.run_open(), second.c.erasures.run_open())
    assert sum(claimed) >= 1
    got = await _ok(await first.http.get(f"/v1/erasures/{job['erasure_id']}", headers=admin))
    assert got["status"] == "done" and got["receipt"]["verified"] is True, got
    assert got["receipt"]["layers"]["session_archive"]["tables"]["sessions"] == 1

    # Retention: held by one engine, refused to the other; then run through PgBouncer.
    await _admin(own_db, "UPDATE sessions SET updated_at = now() - interval '400 days' "
                         f"WHERE tenant_id = '{tenant}' AND session_id = 's1'")
    async with second.c.retention._store.exclusive() as mine:
        assert mine
        assert (await first.c.retention.run(tenant_ids=[tenant])).skipped
    report = await first.c.retention.run(tenant_ids=[tenant])
    assert not report.skipped and report.rows["sessions"] == 1, report

    # Re-embedding: the newer embedder's engine re-embeds what the first one wrote.
    second.c.reembedder.start()
    await second.c.reembedder.idle()
    done = await second.report()
    assert _counts(done, "knowledge_chunks") == {"current": 5, "client_stale": 1}
    assert _counts(done, "memories") == {"current": 1, "client_stale": 1}

    async with first.c.db.unscoped_tx() as tx:
        assert await tx.fetchval(LEASES) == 0  # every lease released
    assert "user=ctxgate_app" in bouncer.log.read_text()  # it all went through PgBouncer


async def _key(app: App, tenant: str, role: str) -> str:
    r = await app.http.post("/v1/admin/keys", headers=app.admin, json={
        "tenant_id": tenant, "role": role, "max_data_level": "confidential"})
    return str((await _ok(r, 201))["api_key"])


async def _ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.text}"
    return r.json()
