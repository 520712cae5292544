"""Read-your-writes fences for read replicas: per tenant, the primary's WAL position after
the tenant's latest write (docs/scaling.md, "Read replicas").

Contract:
- ``raise_to(tenant_id, lsn)`` keeps the larger of the stored position and ``lsn`` (one Lua
  script: two writers finishing out of order never lower it) and sets the key to expire
  ``ttl_ms`` from now. The TTL is the replica lag bound and a margin: a replica is read
  only when it has replayed everything the primary had ``max_lag`` ago, so a write older
  than that is on it whatever the fence says.
- ``get(tenant_id)`` is the position, or None when the tenant wrote nothing that recently.
- One key per tenant (``{namespace}wal``): each call touches one key, so it runs on a Redis
  Cluster unchanged. Positions are byte offsets (``pg_lsn - '0/0'``); Lua compares them as
  doubles, exact below 2^53 bytes of WAL.
"""

from __future__ import annotations

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, namespace

RAISE = """
local now = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tonumber(ARGV[1]) > now then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"""


def fence_key(prefix: str, tenant_id: str) -> str:
    return f"{namespace(prefix, tenant_id)}wal"


class RedisWalFences:
    def __init__(self, client: RedisClient, *, prefix: str, ttl_ms: int) -> None:
        if ttl_ms < 1:
            raise ValueError("ttl_ms must be >= 1")
        self._redis = client
        self._prefix = check_prefix(prefix)
        self._ttl_ms = ttl_ms
        self._raise = client.register_script(RAISE)

    async def raise_to(self, tenant_id: str, lsn: int) -> None:
        await self._raise(keys=[fence_key(self._prefix, tenant_id)], args=[lsn, self._ttl_ms])

    async def get(self, tenant_id: str) -> int | None:
        raw = await self._redis.get(fence_key(self._prefix, tenant_id))
        return None if raw is None else int(raw)
