"""Per-session snapshot of a user's pinned memories, so the stable prefix holds mid-session.

Contract: ``freeze(tenant_id, session_id, payload)`` stores ``payload`` at
``{prefix}:t:{tenant_id}:s:{session_id}:pins`` (ids escaped: ``app.adapters.redis.keys``)
with ``SET NX EX ttl_s`` and returns what is stored now (the first writer wins, so two
concurrent first turns agree on one snapshot); ``read`` returns it or ``None``. The TTL
is the session tail's.
"""

from __future__ import annotations

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, session_key


class RedisPinSnapshots:
    def __init__(self, client: RedisClient, *, prefix: str, ttl_s: int) -> None:
        self._r = client
        self._prefix = check_prefix(prefix)
        self._ttl_s = ttl_s

    def key(self, tenant_id: str, session_id: str) -> str:
        return session_key(self._prefix, tenant_id, session_id, "pins")

    async def read(self, tenant_id: str, session_id: str) -> bytes | None:
        value = await self._r.get(self.key(tenant_id, session_id))
        return value if isinstance(value, bytes) or value is None else value.encode()

    async def freeze(self, tenant_id: str, session_id: str, payload: bytes) -> bytes:
        key = self.key(tenant_id, session_id)
        if await self._r.set(key, payload, nx=True, ex=self._ttl_s):
            return payload
        stored = await self._r.get(key)
        if stored is None:
            return payload
        return stored if isinstance(stored, bytes) else stored.encode()
