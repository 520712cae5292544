"""Redis connection for the service: one pooled ``redis.asyncio.Redis`` per process.

Contract:
- ``open_redis(url)`` builds the client without connecting (connections are made lazily by the
  pool), so it is safe to call from a composition root before the event loop serves traffic.
  ``redis+cluster://host:port`` (or ``rediss+cluster://``) names any node of a Redis Cluster:
  the client learns the slot map from it and routes each command to the node that owns the
  key. Every adapter works on either: each command touches one key, and the keys of one
  session share a hash slot (``keys.session_key``).
- Responses are bytes (``decode_responses=False``): the tail stores orjson bytes and the replay
  cache must return the exact stored body, so no codec may sit in between.
- ``ping(client)`` never raises; it answers whether Redis replied within the socket timeout.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# Redis is a cache here (the archive in Postgres is the truth), so a slow Redis must fail fast
# and let the service fall back, rather than hold a request for the default (no) timeout.
CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 2.0
# Re-check idle pooled connections before use, so a restarted Redis costs one PING, not an error.
HEALTH_CHECK_INTERVAL_S = 30


# What the adapters are given: one server or a cluster (the same command API for single keys).
RedisClient = aioredis.Redis | RedisCluster
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def open_redis(url: str) -> RedisClient:
    """A pooled client for ``url`` (``redis://``, ``rediss://``, ``unix://``, or a cluster
    node as ``redis+cluster://`` / ``rediss+cluster://``)."""
    scheme, _, rest = url.partition("://")
    if scheme in CLUSTER_SCHEMES:
        return RedisCluster.from_url(
            f"{CLUSTER_SCHEMES[scheme]}://{rest}", decode_responses=False,
            socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S,
            socket_keepalive=True)
    client: aioredis.Redis = aioredis.Redis.from_url(
        url,
        decode_responses=False,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_keepalive=True,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
    )
    return client


async def ping(client: RedisClient) -> bool:
    """True when Redis answers PING; False on any connection or protocol error."""
    try:
        return bool(await client.ping())
    except (RedisError, OSError):
        log.warning("redis ping failed", exc_info=True)
        return False
