"""PgLeases against the real server: two claimants, expiry takeover, renewal, release, and
``hold`` cancelling its block once the lease is taken over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.leases import LeaseLost, PgLeases, new_holder

EXPIRE = Sql("UPDATE leases SET expires_at = now() - interval '1 second' WHERE name = :name")
AGE = Sql("UPDATE leases SET expires_at = now() - interval '2 hours' WHERE name = :name")
ROW = Sql("SELECT holder, expires_at - now() AS left FROM leases WHERE name = :name")


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=4)
    yield database
    await database.close()


async def _lapse(db: Database, name: str, sql: Sql = EXPIRE) -> None:
    """The database's clock moved past the lease (the app role may write the table)."""
    async with db.unscoped_tx() as tx:
        await tx.execute(sql, {"name": name})


async def _row(db: Database, name: str) -> tuple[str, float] | None:
    async with db.unscoped_tx() as tx:
        row = await tx.fetchrow(ROW, {"name": name})
    return None if row is None else (row.holder, row.left.total_seconds())


async def test_two_claimants_one_holder(db: Database, uid: str) -> None:
    leases, name = PgLeases(db), f"test/{uid}"
    a, b = new_holder(), new_holder()
    got = await asyncio.gather(*(leases.claim(name=name, holder=h) for h in (a, b, a, b)))
    assert sum(got) == 1  # one claim in four won; the rest found it held
    winner = a if got[0] or got[2] else b
    row = await _row(db, name)
    assert row is not None and row[0] == winner and 0 < row[1] <= leases.ttl_s
    assert not await leases.claim(name=name, holder=new_holder())


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_cannot_renew(
        db: Database, uid: str) -> None:
    leases, name = PgLeases(db), f"test/{uid}"
    old, new = new_holder(), new_holder()
    assert await leases.claim(name=name, holder=old)
    await _lapse(db, name)
    assert await leases.claim(name=name, holder=new)
    assert not await leases.renew(name=name, holder=old)
    await leases.release(name=name, holder=old)  # not the holder: changes nothing
    assert (await _row(db, name) or ("", 0))[0] == new


async def test_renewal_extends_and_release_frees(db: Database, uid: str) -> None:
    leases, name = PgLeases(db, ttl_s=5), f"test/{uid}"
    holder = new_holder()
    assert await leases.claim(name=name, holder=holder)
    await _lapse(db, name)  # lapsed but not taken: the holder may still renew
    assert await leases.renew(name=name, holder=holder)
    row = await _row(db, name)
    assert row is not None and 4 < row[1] <= 5
    assert not await leases.claim(name=name, holder=new_holder())
    await leases.release(name=name, holder=holder)
    assert await _row(db, name) is None
    assert await leases.claim(name=name, holder=new_holder())


async def test_a_release_deletes_rows_long_lapsed(db: Database, uid: str) -> None:
    leases = PgLeases(db)
    dead, live = f"test/{uid}/dead", f"test/{uid}/live"
    assert await leases.claim(name=dead, holder=new_holder())  # its holder died
    await _lapse(db, dead, AGE)
    holder = new_holder()
    assert await leases.claim(name=live, holder=holder)
    await leases.release(name=live, holder=holder)
    assert await _row(db, dead) is None


async def test_hold_renews_while_the_block_runs_and_releases(db: Database, uid: str) -> None:
    # A lease of 1.5 s, renewed every third of it: a loaded machine's scheduling delays
    # (hundreds of ms) cannot make it lapse, which a 0.6 s lease did not rule out.
    leases, name = PgLeases(db, ttl_s=1.5), f"test/{uid}"
    async with leases.hold(name) as mine:
        assert mine
        async with leases.hold(name) as second:
            assert not second
        await asyncio.sleep(3.75)  # 2.5 leases: held only because it is renewed
        async with PgLeases(db).hold(name) as third:
            assert not third
    assert await _row(db, name) is None


async def test_hold_stops_the_block_when_the_lease_is_taken_over(
        db: Database, uid: str) -> None:
    leases, name = PgLeases(db, ttl_s=0.6), f"test/{uid}"
    reached_end = False

    async def work() -> None:
        nonlocal reached_end
        async with leases.hold(name) as mine:
            assert mine
            await _lapse(db, name)
            assert await leases.claim(name=name, holder=new_holder())  # another process
            await asyncio.sleep(2)  # the next renewal finds it gone and cancels this
            reached_end = True

    with pytest.raises(LeaseLost):
        await work()
    assert not reached_end
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    row = await _row(db, name)
    assert row is not None  # the new holder's lease stays


async def test_hold_passes_an_outside_cancellation_through(db: Database, uid: str) -> None:
    leases, name = PgLeases(db, ttl_s=5), f"test/{uid}"
    entered = asyncio.Event()

    async def work() -> None:
        async with leases.hold(name):
            entered.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(work())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _row(db, name) is None  # released on the way out
