"""Leakage canaries: the operator's registry, and the matcher every worker checks turns with.

Contract: ``create`` / ``list_canaries`` / ``delete`` are the platform operator's (admin token)
CRUD over ``CanaryStore``. ``matcher()`` returns this worker's compiled ``CanaryMatcher`` for
the registry's current revision. It is refreshed lazily by the turns themselves: when the
last check is older than ``refresh_s``, one turn reads the revision (one tiny query) and
reloads the list only when it moved; turns arriving meanwhile use the matcher they have
rather than wait. So a canary registered through any worker is checked by every turn that
starts more than ``refresh_s`` (plus one revision read) after it was registered, in every
worker process; a create or delete through this worker takes effect on its next turn.
A failed refresh keeps the previous matcher (a registry read never fails a turn) and is
retried at the next interval.

The registry is operator data, read by the service's own platform-level queries: canary
texts reach only the admin routes and the matcher, never a tenant's response, manifest,
log line or metric label.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from app.core.canaries import Canary, CanaryMatcher
from app.core.errors import NotFound
from app.ports import CanaryInfo, CanaryStore

log = logging.getLogger("ctxgate.canaries")

REFRESH_S = 5.0


class CanaryRegistry:
    def __init__(self, store: CanaryStore, *, refresh_s: float = REFRESH_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._refresh_s = refresh_s
        self._clock = clock
        self._matcher = CanaryMatcher.build([])
        self._revision: int | None = None
        self._checked_at: float | None = None
        # Bumped by this worker's own create / delete: a refresh that began before one of
        # them may have read the old revision, so it does not mark the registry fresh.
        self._changes = 0
        self._lock = asyncio.Lock()

    async def create(self, *, tenant_id: str, user_id: str | None, label: str, text: str,
                     created_by: str) -> CanaryInfo:
        info = await self._store.create(tenant_id=tenant_id, user_id=user_id, label=label,
                                        text=text, created_by=created_by)
        self._changed()
        return info

    async def list_canaries(self, tenant_id: str | None = None) -> list[CanaryInfo]:
        return await self._store.list_canaries(tenant_id=tenant_id)

    async def delete(self, canary_id: str) -> None:
        if not await self._store.delete(canary_id=canary_id):
            raise NotFound(f"no canary {canary_id!r}")
        self._changed()

    def _changed(self) -> None:
        self._changes += 1
        self._checked_at = None

    async def matcher(self) -> CanaryMatcher:
        now = self._clock()
        fresh = self._checked_at is not None and now - self._checked_at < self._refresh_s
        if fresh or self._lock.locked():
            return self._matcher
        async with self._lock:
            changes = self._changes
            try:
                revision = await self._store.revision()
                if revision != self._revision:
                    rows = await self._store.list_canaries(tenant_id=None)
                    self._matcher = CanaryMatcher.build([
                        Canary(r.canary_id, r.tenant_id, r.user_id, r.text) for r in rows])
                    self._revision = revision
            except Exception:  # the previous registry keeps checking turns
                log.warning("the leakage canary registry was not refreshed", exc_info=True)
            if changes == self._changes:
                self._checked_at = now
        return self._matcher
