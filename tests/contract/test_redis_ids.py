"""Opaque ids in Redis keys on a real server: the erasure's SCAN finds exactly the user's keys,
whatever the ids hold (``:`` that would split a key, globs that would widen a pattern)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.adapters.redis.client import RedisClient, open_redis
from app.adapters.redis.erasure import RedisEraser
from app.adapters.redis.keys import replay_key, session_key, tail_key
from app.ports import ErasureTarget


@pytest.fixture
async def client(any_redis_url: str, uid: str) -> AsyncIterator[RedisClient]:
    c = open_redis(any_redis_url)
    yield c
    for key in [k async for k in c.scan_iter(match=f"ids-{uid}:*")]:
        await c.unlink(key)  # one key per command: a cluster refuses cross-slot ones
    await c.aclose()


def target(tenant: str, user: str, sessions: tuple[str, ...], turns: tuple[str, ...]
           ) -> ErasureTarget:
    return ErasureTarget(tenant_id=tenant, erasure_id="er_1", user_id=user, tombstone="erased:x",
                         session_ids=sessions, turn_ids=turns)


async def test_erasure_finds_only_the_users_keys(client: RedisClient, uid: str) -> None:
    prefix = f"ids-{uid}"
    mine = [tail_key(prefix, "acme:prod", "agent:main:discord:channel:123"),
            session_key(prefix, "acme:prod", "agent:main:discord:channel:123", "pins"),
            replay_key(prefix, "acme:prod", "turn:*")]
    others = [tail_key(prefix, "acme:prod", "agent:main:discord:channel:1234"),
              tail_key(prefix, "acme:prod", "agent:main:discord"),
              tail_key(prefix, "acme:prod", "agent:main:discord:channel:123:tail"),
              tail_key(prefix, "acme", "prod:agent:main:discord:channel:123"),
              tail_key(prefix, "acme%3Aprod", "agent:main:discord:channel:123"),
              replay_key(prefix, "acme:prod", "turn:1"),
              replay_key(prefix, "acme:prod", "*")]
    assert len(set(mine + others)) == len(mine) + len(others)
    for k in mine + others:
        await client.set(k, b"x")
    eraser = RedisEraser(client, store=None, prefix=prefix)  # type: ignore[arg-type]
    tgt = target("acme:prod", "alice@acme.com", ("agent:main:discord:channel:123",),
                 ("turn:*",))
    assert await eraser.remaining(tgt) == len(mine)
    await client.unlink(*mine)
    assert await eraser.remaining(tgt) == 0
    assert await client.exists(*others) == len(others)
