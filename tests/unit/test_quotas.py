"""Quotas without Redis: the limits in force for a tenant, the RateLimit headers, and the
service over an in-memory limiter — refusals are 429s that say when to retry, a turn's slot
comes back whatever the turn does, and a limiter that fails or hangs lets requests through
(fail-open, counted and noted as degraded)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from app.api.ratelimit import headers
from app.core.errors import QuotaExceeded
from app.core.model import DataLevel, Principal, Role
from app.core.quotas import Limit, QuotaDecision, QuotaLimits, QuotaOverride, effective
from app.observability import Metrics
from app.service import degraded
from app.service.quotas import Quotas

DEFAULTS = QuotaLimits(requests_per_s=10, requests_burst=20, key_requests_per_s=0,
                       turns_concurrent=4)


class FakeLimiter:
    """The port in memory, without a clock: buckets never refill, leases never expire."""

    def __init__(self, *, fail: BaseException | None = None, hang: bool = False) -> None:
        self.taken: dict[str, int] = {}
        self.leases: dict[str, set[str]] = {}
        self.seen: list[QuotaLimits] = []
        self._fail, self._hang = fail, hang

    async def _trouble(self) -> None:
        if self._hang:
            await asyncio.sleep(3600)
        if self._fail is not None:
            raise self._fail

    async def take(self, *, tenant_id: str, key_id: str, limits: QuotaLimits) -> QuotaDecision:
        await self._trouble()
        self.seen.append(limits)
        used = self.taken.get(tenant_id, 0)
        if used >= limits.requests_burst:
            return QuotaDecision(allowed=False, limit=Limit.TENANT_RATE,
                                 quota=limits.requests_burst, remaining=0, reset_s=2.0,
                                 retry_after_s=0.1, window_s=2.0)
        self.taken[tenant_id] = used + 1
        return QuotaDecision(allowed=True, limit=Limit.TENANT_RATE, quota=limits.requests_burst,
                             remaining=limits.requests_burst - used - 1, reset_s=0.1,
                             window_s=2.0)

    async def lease(self, *, tenant_id: str, lease_id: str, cap: int, ttl_s: float
                    ) -> QuotaDecision:
        await self._trouble()
        held = self.leases.setdefault(tenant_id, set())
        if len(held) >= cap:
            return QuotaDecision(allowed=False, limit=Limit.TURNS, quota=cap, remaining=0,
                                 reset_s=0, retry_after_s=1.0)
        held.add(lease_id)
        return QuotaDecision(allowed=True, limit=Limit.TURNS, quota=cap,
                             remaining=cap - len(held), reset_s=0)

    async def release(self, *, tenant_id: str, lease_id: str) -> None:
        self.leases.get(tenant_id, set()).discard(lease_id)


def principal(tenant: str = "acme", **quota: float | int | None) -> Principal:
    return Principal(key_id="k1", tenant_id=tenant, role=Role.RUNTIME,
                     max_data_level=DataLevel.INTERNAL, domains=None,
                     quota=QuotaOverride(**quota))  # type: ignore[arg-type]


def quotas(limiter: FakeLimiter, pool_size: int = 20) -> tuple[Quotas, Metrics]:
    metrics = Metrics(CollectorRegistry())
    return Quotas(limiter, defaults=DEFAULTS, pool_size=pool_size, lease_ttl_s=60,
                  timeout_s=0.05, metrics=metrics), metrics


def test_a_tenants_overrides_lay_over_the_defaults() -> None:
    assert effective(DEFAULTS, QuotaOverride(), pool_size=20) == DEFAULTS
    mine = effective(DEFAULTS, QuotaOverride(requests_per_s=2, turns_concurrent=0),
                     pool_size=20)
    assert (mine.requests_per_s, mine.requests_burst, mine.turns_concurrent) == (2, 20, 0)


def test_turns_in_flight_stay_below_one_workers_pool() -> None:
    assert effective(DEFAULTS, QuotaOverride(turns_concurrent=500),
                     pool_size=20).turns_concurrent == 19
    assert effective(DEFAULTS, QuotaOverride(), pool_size=2).turns_concurrent == 1


def test_a_keys_bucket_holds_as_many_seconds_as_its_tenants() -> None:
    lim = effective(DEFAULTS, QuotaOverride(key_requests_per_s=3), pool_size=20)
    assert lim.key_requests_burst == 6  # 20 / 10 = 2 s of 3/s
    assert DEFAULTS.key_requests_burst == 0
    alone = QuotaLimits(requests_per_s=0, requests_burst=1, key_requests_per_s=2.5,
                        turns_concurrent=0)
    assert alone.key_requests_burst == 3


def test_headers_name_the_policy_and_what_is_left() -> None:
    ok = QuotaDecision(allowed=True, limit=Limit.TENANT_RATE, quota=400, remaining=399,
                       reset_s=0.004, window_s=2.0)
    assert headers(ok) == {"RateLimit-Policy": '"tenant_rate";q=400;w=2',
                           "RateLimit": '"tenant_rate";r=399;t=1'}
    busy = QuotaDecision(allowed=False, limit=Limit.TURNS, quota=4, remaining=0, reset_s=0,
                         retry_after_s=1.0)
    assert headers(busy) == {"RateLimit-Policy": '"turns_concurrent";q=4;qu="concurrent-requests"',
                             "RateLimit": '"turns_concurrent";r=0;t=1'}


async def test_past_its_burst_a_tenant_is_refused_with_the_wait_and_counted() -> None:
    limiter = FakeLimiter()
    service, metrics = quotas(limiter)
    for _ in range(2):
        assert await service.admit(principal(requests_burst=2)) is not None
    with pytest.raises(QuotaExceeded) as refused:
        await service.admit(principal(requests_burst=2))
    assert refused.value.type == "quota-exceeded" and refused.value.retry_after_s == 0.1
    assert refused.value.decision.limit is Limit.TENANT_RATE
    assert metrics.quota_rejections.labels(limit="tenant_rate")._value.get() == 1
    assert limiter.seen[-1].requests_burst == 2  # the tenant's own limits were asked about
    assert await service.admit(principal("other", requests_burst=2)) is not None


async def test_no_rate_limit_asks_nothing() -> None:
    limiter = FakeLimiter()
    service, _ = quotas(limiter)
    assert await service.admit(principal(requests_per_s=0)) is None
    assert limiter.seen == []


async def test_a_turn_slot_comes_back_whatever_the_turn_does() -> None:
    limiter = FakeLimiter()
    service, metrics = quotas(limiter)
    me = principal(turns_concurrent=1)
    with pytest.raises(RuntimeError):
        async with service.turn(me):
            raise RuntimeError("the turn failed")
    async with service.turn(me):
        with pytest.raises(QuotaExceeded) as refused:
            async with service.turn(me):
                pass
        async with service.turn(principal("other", turns_concurrent=1)):
            pass
    assert refused.value.retry_after_s == 1.0
    assert metrics.quota_rejections.labels(limit="turns_concurrent")._value.get() == 1
    assert limiter.leases == {"acme": set(), "other": set()}


@pytest.mark.parametrize("limiter", [FakeLimiter(fail=ConnectionError("redis down")),
                                     FakeLimiter(hang=True)], ids=["down", "hung"])
async def test_a_limiter_that_fails_or_hangs_lets_requests_through(
        limiter: FakeLimiter) -> None:
    service, metrics = quotas(limiter)
    with degraded.recording() as went_without:
        assert await service.admit(principal()) is None
        async with service.turn(principal()):
            pass
    assert went_without == {"redis"}
    assert metrics.quota_unavailable._value.get() == 2


async def test_a_failed_release_never_fails_the_turn() -> None:
    limiter = FakeLimiter()
    service, _ = quotas(limiter)

    async def broken(*, tenant_id: str, lease_id: str) -> None:
        raise ConnectionError("redis went away mid-turn")

    limiter.release = broken  # type: ignore[method-assign]
    async with service.turn(principal()):
        pass  # the lease stays until its ttl; the turn still succeeds


async def test_a_lease_whose_answer_was_lost_is_still_released() -> None:
    limiter = FakeLimiter()
    service, metrics = quotas(limiter)
    taken = limiter.lease

    async def lost_reply(*, tenant_id: str, lease_id: str, cap: int, ttl_s: float
                         ) -> QuotaDecision:
        await taken(tenant_id=tenant_id, lease_id=lease_id, cap=cap, ttl_s=ttl_s)
        raise TimeoutError  # the script ran; its reply never came

    limiter.lease = lost_reply  # type: ignore[method-assign]
    async with service.turn(principal()):
        assert len(limiter.leases["acme"]) == 1
    assert limiter.leases["acme"] == set()  # not held until it expires
    assert metrics.quota_unavailable._value.get() == 1
