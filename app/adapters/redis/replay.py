"""Replay cache: the exact response body of an assembled turn, so a retry is byte-identical.

Contract:
- ``put(tenant_id, turn_id, payload)`` stores ``payload`` verbatim at
  ``{prefix}:t:{tenant_id}:turn:{turn_id}:replay`` with ``SET ... EX ttl_s`` (last write wins).
- ``get`` returns the stored bytes unchanged, or ``None`` when absent or expired.
- ``delete`` forgets a turn. Keys are tenant-namespaced, so a turn_id reused by another tenant
  never returns this tenant's body.
- The cache is an optimisation: the manifest in Postgres stays the record of the turn.
"""

from __future__ import annotations

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, replay_key


class RedisReplayCache:
    def __init__(self, client: RedisClient, *, prefix: str, ttl_s: int) -> None:
        if ttl_s < 1:
            raise ValueError("ttl_s must be positive")
        self._r = client
        self._prefix = check_prefix(prefix)
        self._ttl_s = ttl_s

    def key(self, tenant_id: str, turn_id: str) -> str:
        return replay_key(self._prefix, tenant_id, turn_id)

    async def get(self, tenant_id: str, turn_id: str) -> bytes | None:
        value = await self._r.get(self.key(tenant_id, turn_id))
        if value is None or isinstance(value, bytes):
            return value
        # Only reachable with a client built with decode_responses=True: never re-encode,
        # since the whole point is byte-identical replay.
        raise TypeError("replay cache needs a Redis client with decode_responses=False")

    async def put(self, tenant_id: str, turn_id: str, payload: bytes) -> None:
        await self._r.set(self.key(tenant_id, turn_id), payload, ex=self._ttl_s)

    async def delete(self, tenant_id: str, turn_id: str) -> None:
        await self._r.delete(self.key(tenant_id, turn_id))
