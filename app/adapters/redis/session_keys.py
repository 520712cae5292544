"""Every cached key of one session (``SessionCache``), for the retention job.

A pruned session must leave nothing a later session of the same id could pick up: its tail
(``tail``) and its frozen memory snapshot (``pins``, set NX: a stale one would be served
to the new session instead of a fresh one). Both share the session's hash tag, so one UNLINK
removes them, also on a cluster. ``SESSION_KINDS`` must name every kind passed to
``keys.session_key``; tests/api/test_retention.py checks that against the code.
"""

from __future__ import annotations

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, session_key

SESSION_KINDS = ("tail", "pins")


class RedisSessionKeys:
    def __init__(self, client: RedisClient, *, prefix: str) -> None:
        self._r = client
        self._prefix = check_prefix(prefix)

    async def drop(self, *, tenant_id: str, session_id: str) -> None:
        await self._r.unlink(*(session_key(self._prefix, tenant_id, session_id, kind)
                               for kind in SESSION_KINDS))
