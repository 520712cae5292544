"""Redis connection for the service: one pooled ``redis.asyncio.Redis`` per process.

Contract:
- ``open_redis(url)`` builds the client without connecting (connections are made lazily by the
  pool), so it is safe to call from a composition root before the event loop serves traffic.
- Responses are bytes (``decode_responses=False``): the tail stores orjson bytes and the replay
  cache must return the exact stored body, so no codec may sit in between.
- ``ping(client)`` never raises; it answers whether Redis replied within the socket timeout.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# Redis is a cache here (the archive in Postgres is the truth), so a slow Redis must fail fast
# and let the service fall back, rather than hold a request for the default (no) timeout.
CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 2.0
# Re-check idle pooled connections before use, so a restarted Redis costs one PING, not an error.
HEALTH_CHECK_INTERVAL_S = 30


def open_redis(url: str) -> aioredis.Redis:
    """A pooled client for ``url`` (``redis://``, ``rediss://`` or ``unix://``)."""
    client: aioredis.Redis = aioredis.Redis.from_url(
        url,
        decode_responses=False,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_keepalive=True,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
    )
    return client


async def ping(client: aioredis.Redis) -> bool:
    """True when Redis answers PING; False on any connection or protocol error."""
    try:
        return bool(await client.ping())
    except (RedisError, OSError):
        log.warning("redis ping failed", exc_info=True)
        return False
