"""The Redis layer of a "forget me" erasure (``Eraser``): every cached key of the user.

It SCANs the tenant's namespace (``{prefix}:t:{tenant}:``; on a cluster, every primary) and
deletes each key whose segments
hold a ``(kind, escaped id)`` pair naming the user's data: ``s:<session id>`` (session tails and any
other per-session snapshot), ``turn:<turn id>`` (replay cache entries of the user's turns) or
``u:<user id>`` / ``user:<user id>`` (anything keyed by the user). Matching pairs, not bare
segments, keeps a session id such as ``tail`` from matching every key of the tenant.

Redis is not transactional with Postgres: the counts are recorded after the deletes, so a
crash in between re-runs the scan, which then finds nothing (the receipt counts zero for it).
"""

from __future__ import annotations

import itertools

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, namespace, segment
from app.ports import ErasureStore, ErasureTarget, LayerCount

SCAN_COUNT = 1000


def _wanted(target: ErasureTarget) -> dict[str, set[str]]:
    """The key segments naming the user's data, per kind: key segments are escaped ids."""
    user = segment(target.user_id, what="user_id")
    return {"s": {segment(s, what="session_id") for s in target.session_ids},
            "turn": {segment(t, what="turn_id") for t in target.turn_ids},
            "u": {user}, "user": {user}}


def _kind(rest: list[str], wanted: dict[str, set[str]]) -> str | None:
    """``kind:last-segment`` (``s:tail``, ``turn:replay``) when a pair names the user's data."""
    for kind, value in itertools.pairwise(rest):
        if value in wanted.get(kind, ()):
            return f"{kind}:{rest[-1]}"
    return None


class RedisEraser:
    layer = "redis_cache"

    def __init__(self, client: RedisClient, store: ErasureStore, *, prefix: str) -> None:
        self._r = client
        self._store = store
        self._prefix = check_prefix(prefix)

    async def _matching(self, target: ErasureTarget) -> dict[bytes, str]:
        ns = namespace(self._prefix, target.tenant_id)
        wanted = _wanted(target)
        found: dict[bytes, str] = {}
        async for raw in self._r.scan_iter(match=f"{ns}*", count=SCAN_COUNT):
            key = raw if isinstance(raw, bytes) else str(raw).encode()
            # A session's hash-tag braces are not part of its segments (ids hold none).
            rest = key.decode(errors="replace")[len(ns):].replace("{", "").replace(
                "}", "").split(":")
            kind = _kind(rest, wanted)
            if kind is not None:
                found[key] = kind
        return found

    async def erase(self, target: ErasureTarget) -> LayerCount:
        found = await self._matching(target)
        # One UNLINK per key, pipelined: the user's keys live in many hash slots of a cluster,
        # where one multi-key command across slots is refused (CROSSSLOT).
        async with self._r.pipeline(transaction=False) as pipe:
            for key in found:
                # The generic form: a cluster pipeline's unlink() is a coroutine of its own
                # (it splits multi-key calls), not a queued command.
                pipe.execute_command("UNLINK", key)
            erased = sum(int(n) for n in await pipe.execute()) if found else 0
        tables: dict[str, int] = {}
        for kind in found.values():
            tables[kind] = tables.get(kind, 0) + 1
        count = LayerCount(found=len(found), erased=erased, tables=tables)
        await self._store.record(target=target, layer=self.layer, count=count)
        return count

    async def remaining(self, target: ErasureTarget) -> int:
        return len(await self._matching(target))
