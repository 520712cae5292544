"""The quota scripts on a real Redis, one server and a 3-master cluster: buckets refill at
their rate and hold their burst, a key's bucket sits inside its tenant's, tenants never share
a bucket, concurrent takes never overdraw, and a turn lease its holder never released
expires by itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.adapters.redis.client import RedisClient, open_redis
from app.adapters.redis.quotas import RedisRateLimiter
from app.core.quotas import Limit, QuotaLimits


@pytest.fixture
async def client(any_redis_url: str, uid: str) -> AsyncIterator[RedisClient]:
    c = open_redis(any_redis_url)
    yield c
    for key in [k async for k in c.scan_iter(match=f"quota-{uid}:*")]:
        await c.unlink(key)  # one key per command: a cluster refuses cross-slot ones
    await c.aclose()


@pytest.fixture
def limiter(client: RedisClient, uid: str) -> RedisRateLimiter:
    return RedisRateLimiter(client, prefix=f"quota-{uid}")


def limits(rate: float, burst: int, key_rate: float = 0.0) -> QuotaLimits:
    return QuotaLimits(requests_per_s=rate, requests_burst=burst, key_requests_per_s=key_rate,
                       turns_concurrent=0)


async def test_a_bucket_holds_its_burst_then_refills_at_its_rate(
        limiter: RedisRateLimiter) -> None:
    lim = limits(rate=10, burst=3)
    taken = [await limiter.take(tenant_id="acme", key_id="k1", limits=lim) for _ in range(3)]
    assert [d.allowed for d in taken] == [True] * 3
    assert [d.remaining for d in taken] == [2, 1, 0]
    assert taken[0].quota == 3 and taken[0].window_s == pytest.approx(0.3)
    refused = await limiter.take(tenant_id="acme", key_id="k1", limits=lim)
    assert not refused.allowed and refused.limit is Limit.TENANT_RATE
    assert 0 < refused.retry_after_s <= 0.1  # one token at 10/s
    await asyncio.sleep(refused.retry_after_s + 0.05)
    assert (await limiter.take(tenant_id="acme", key_id="k1", limits=lim)).allowed


async def test_an_idle_bucket_fills_to_its_burst_not_past_it(
        limiter: RedisRateLimiter) -> None:
    lim = limits(rate=50, burst=2)
    for _ in range(2):
        await limiter.take(tenant_id="acme", key_id="k1", limits=lim)
    await asyncio.sleep(0.2)  # 10 tokens' worth of time; the bucket holds 2
    again = await limiter.take(tenant_id="acme", key_id="k1", limits=lim)
    # what is left after one take is read off the bucket itself, so a slow machine's time
    # between calls (a token per 20 ms) cannot blur it: 1, never the 9 an uncapped bucket holds
    assert again.allowed and again.remaining == 1, again


async def test_tenants_have_their_own_buckets(limiter: RedisRateLimiter) -> None:
    lim = limits(rate=0.01, burst=1)
    assert (await limiter.take(tenant_id="acme:prod", key_id="k", limits=lim)).allowed
    assert not (await limiter.take(tenant_id="acme:prod", key_id="k", limits=lim)).allowed
    # Ids that would collide if they were not escaped into key segments.
    for other in ("acme", "acme%3Aprod", "acme:prod:x", "{acme:prod}"):
        assert (await limiter.take(tenant_id=other, key_id="k", limits=lim)).allowed


async def test_a_key_is_limited_inside_its_tenant_and_a_refusal_takes_nothing(
        limiter: RedisRateLimiter) -> None:
    lim = limits(rate=100, burst=10, key_rate=0.01)  # a key's bucket: 1 request
    first = await limiter.take(tenant_id="acme", key_id="k1", limits=lim)
    assert first.allowed and first.remaining == 9
    refused = await limiter.take(tenant_id="acme", key_id="k1", limits=lim)
    assert not refused.allowed and refused.limit is Limit.KEY_RATE and refused.quota == 1
    other_key = await limiter.take(tenant_id="acme", key_id="k2", limits=lim)
    assert other_key.allowed
    assert other_key.remaining >= 8  # the refused request took no tenant token


async def test_a_key_rate_alone_is_its_own_bucket(limiter: RedisRateLimiter) -> None:
    lim = limits(rate=0, burst=1, key_rate=2)  # no tenant rate: a key's bucket holds 2
    taken = [await limiter.take(tenant_id="acme", key_id="k1", limits=lim) for _ in range(3)]
    assert [d.allowed for d in taken] == [True, True, False]
    assert taken[0].limit is Limit.KEY_RATE and taken[0].quota == 2
    assert taken[0].window_s == pytest.approx(1.0)


async def test_concurrent_takes_never_overdraw(limiter: RedisRateLimiter) -> None:
    lim = limits(rate=0.01, burst=5)
    answers = await asyncio.gather(*(
        limiter.take(tenant_id="acme", key_id=f"k{i % 3}", limits=lim) for i in range(40)))
    assert sum(d.allowed for d in answers) == 5


async def test_turn_leases_cap_the_tenant_and_come_back(limiter: RedisRateLimiter) -> None:
    held = [await limiter.lease(tenant_id="acme", lease_id=f"l{i}", cap=2, ttl_s=30)
            for i in range(2)]
    assert [d.allowed for d in held] == [True, True] and held[1].remaining == 0
    refused = await limiter.lease(tenant_id="acme", lease_id="l2", cap=2, ttl_s=30)
    assert not refused.allowed and refused.limit is Limit.TURNS and refused.window_s is None
    assert refused.retry_after_s == 1.0
    assert (await limiter.lease(tenant_id="other", lease_id="l0", cap=2, ttl_s=30)).allowed
    await limiter.release(tenant_id="acme", lease_id="l0")
    assert (await limiter.lease(tenant_id="acme", lease_id="l2", cap=2, ttl_s=30)).allowed


async def test_a_lease_whose_holder_died_expires(limiter: RedisRateLimiter) -> None:
    assert (await limiter.lease(tenant_id="acme", lease_id="crashed", cap=1, ttl_s=0.2)).allowed
    assert not (await limiter.lease(tenant_id="acme", lease_id="b", cap=1, ttl_s=30)).allowed
    await asyncio.sleep(0.3)  # the crashed replica never released
    assert (await limiter.lease(tenant_id="acme", lease_id="b", cap=1, ttl_s=30)).allowed


async def test_concurrent_leases_never_pass_the_cap(limiter: RedisRateLimiter) -> None:
    answers = await asyncio.gather(*(
        limiter.lease(tenant_id="acme", lease_id=f"l{i}", cap=3, ttl_s=30) for i in range(30)))
    assert sum(d.allowed for d in answers) == 3
