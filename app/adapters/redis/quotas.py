"""Quotas in Redis: token buckets and turn leases, each step one Lua script.

Contract (``app.ports.RateLimiter``):
- ``take`` refills the tenant's bucket and the key's from the time elapsed since each was last
  written (``refill = rate x elapsed``, never past the burst), then takes one token from each,
  or from neither when either holds less than one; a refusal writes nothing. A bucket is a
  hash ``{t: tokens, at: ms}`` that expires once it would be full again: a missing key is a
  full bucket, so idle tenants cost no memory.
- ``lease`` holds one of the tenant's ``cap`` turn slots: a sorted set of lease ids scored
  by their expiry. Expired leases (a replica that died mid-turn) are dropped first, so a
  crash costs the tenant a slot for ``ttl_s`` at most. ``release`` removes the lease.
- The clock is Redis's own (``TIME`` inside the script): replicas with skewed clocks share
  one bucket correctly. Every key of a tenant carries the hash tag ``{q:<tenant>}``
  (``keys.quota_key``), so each script runs on one node of a Redis Cluster.
"""

from __future__ import annotations

import math

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, quota_key, segment
from app.core.quotas import Limit, QuotaDecision, QuotaLimits

# Milliseconds throughout; every number returned is an integer (Redis truncates Lua floats).
_CLOCK = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
"""

TAKE = _CLOCK + """
local function level(key, rate, burst)
  local v = redis.call('HMGET', key, 't', 'at')
  local tokens, at = tonumber(v[1]), tonumber(v[2])
  if tokens == nil or at == nil then return burst end
  return math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
end
local function keep(key, tokens, rate, burst)
  redis.call('HSET', key, 't', string.format('%.6f', tokens), 'at', string.format('%.3f', now))
  redis.call('PEXPIRE', key, math.ceil((burst - tokens) * 1000 / rate) + 1000)
end
local function refuse(which, rate, burst, tokens)
  return {0, which, burst, 0, math.ceil((burst - tokens) * 1000 / rate),
          math.ceil((1 - tokens) * 1000 / rate)}
end
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local krate, kburst = tonumber(ARGV[3]), tonumber(ARGV[4])
local tenant, key = burst, kburst
if rate > 0 then
  tenant = level(KEYS[1], rate, burst)
  if tenant < 1 then return refuse(1, rate, burst, tenant) end
end
if krate > 0 then
  key = level(KEYS[2], krate, kburst)
  if key < 1 then return refuse(2, krate, kburst, key) end
  keep(KEYS[2], key - 1, krate, kburst)
end
if rate > 0 then
  keep(KEYS[1], tenant - 1, rate, burst)
  return {1, 1, burst, math.floor(tenant - 1), math.ceil((burst - tenant + 1) * 1000 / rate), 0}
end
return {1, 2, kburst, math.floor(key - 1), math.ceil((kburst - key + 1) * 1000 / krate), 0}
"""

LEASE = _CLOCK + """
local cap, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= cap then return {0, 3, cap, 0, 0, 0} end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl))
return {1, 3, cap, cap - held - 1, 0, 0}
"""

_LIMITS = {1: Limit.TENANT_RATE, 2: Limit.KEY_RATE, 3: Limit.TURNS}
# A refused turn slot frees when some turn of the tenant ends: usually well within a second.
LEASE_RETRY_AFTER_S = 1.0


def _decision(reply: list[int], *, limits: QuotaLimits | None = None) -> QuotaDecision:
    """The script's reply ``[allowed, limit, quota, remaining, reset_ms, retry_ms]``; with
    ``limits``, a bucket's (its window is burst / rate), else a lease's."""
    allowed, which, quota, remaining, reset_ms, retry_ms = (int(v) for v in reply)
    limit, window = _LIMITS[which], None
    if limits is not None:
        rate = limits.requests_per_s if limit is Limit.TENANT_RATE else limits.key_requests_per_s
        window = quota / rate
    retry = retry_ms / 1000 if limits is not None else LEASE_RETRY_AFTER_S
    return QuotaDecision(allowed=bool(allowed), limit=limit, quota=quota,
                         remaining=max(0, remaining), reset_s=max(0, reset_ms) / 1000,
                         retry_after_s=0.0 if allowed else retry, window_s=window)


class RedisRateLimiter:
    def __init__(self, client: RedisClient, *, prefix: str) -> None:
        self._r = client
        self._prefix = check_prefix(prefix)
        self._take = client.register_script(TAKE)
        self._lease = client.register_script(LEASE)

    async def take(self, *, tenant_id: str, key_id: str, limits: QuotaLimits
                   ) -> QuotaDecision:
        keys = [quota_key(self._prefix, tenant_id, "rate"),
                quota_key(self._prefix, tenant_id, f"key:{segment(key_id, what='key_id')}:rate")]
        reply = await self._take(keys=keys, args=[
            repr(limits.requests_per_s), limits.requests_burst,
            repr(limits.key_requests_per_s), limits.key_requests_burst])
        return _decision(reply, limits=limits)

    async def lease(self, *, tenant_id: str, lease_id: str, cap: int, ttl_s: float
                    ) -> QuotaDecision:
        reply = await self._lease(keys=[quota_key(self._prefix, tenant_id, "turns")],
                                  args=[lease_id, cap, math.ceil(ttl_s * 1000)])
        return _decision(reply)

    async def release(self, *, tenant_id: str, lease_id: str) -> None:
        await self._r.zrem(quota_key(self._prefix, tenant_id, "turns"), lease_id)
