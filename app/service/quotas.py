"""Quotas: a tenant's excess is refused before it reaches the stores (docs/quotas.md).

Contract:
- ``admit(principal)`` takes one token for a request from its tenant's bucket and its key's
  and returns the answer (for the RateLimit headers), or None when no rate limit is on or
  the limiter did not answer; an empty bucket raises ``QuotaExceeded`` (429) with the wait.
- ``async with turn(principal):`` holds one of the tenant's turn slots across every replica
  for the block; past the tenant's cap it raises ``QuotaExceeded`` at once. The route asks
  for it before the worker's admission slot, so a tenant at its cap never holds a worker
  slot another tenant's turn could use, and its turns never hold more than ``pool_size - 1``
  database connections (``app.core.quotas.effective``).
- The limiter failing — Redis down, or slower than ``timeout_s`` — lets the request through
  (fail-open): counted in ``ctxgate_quota_unavailable``, logged, and noted as degraded
  ``redis`` (a turn's manifest says so). A quota protects the shared stores from one tenant;
  refusing every tenant while Redis restarts would turn a cache outage into a full one, and
  each worker's admission control still bounds its own load meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from app.core.errors import QuotaExceeded
from app.core.model import Principal
from app.core.quotas import Limit, QuotaDecision, QuotaLimits, effective
from app.observability import Metrics
from app.ports import RateLimiter
from app.service import degraded

log = logging.getLogger(__name__)
T = TypeVar("T")

_WHAT = {Limit.TENANT_RATE: "the tenant's request rate",
         Limit.KEY_RATE: "this key's request rate",
         Limit.TURNS: "the tenant's turns in flight"}


class Quotas:
    def __init__(self, limiter: RateLimiter, *, defaults: QuotaLimits, pool_size: int,
                 lease_ttl_s: float, timeout_s: float, metrics: Metrics) -> None:
        self._limiter = limiter
        self._defaults = defaults
        self._pool_size = pool_size
        self._lease_ttl_s = lease_ttl_s
        self._timeout_s = timeout_s
        self._metrics = metrics

    def limits(self, principal: Principal) -> QuotaLimits:
        """The limits in force for the principal's tenant."""
        return effective(self._defaults, principal.quota, pool_size=self._pool_size)

    async def admit(self, principal: Principal) -> QuotaDecision | None:
        limits = self.limits(principal)
        if limits.requests_per_s <= 0 and limits.key_requests_per_s <= 0:
            return None
        decision = await self._ask(self._limiter.take(
            tenant_id=principal.tenant_id, key_id=principal.key_id, limits=limits))
        return self._checked(decision)

    @contextlib.asynccontextmanager
    async def turn(self, principal: Principal) -> AsyncIterator[None]:
        cap = self.limits(principal).turns_concurrent
        if cap <= 0:
            yield
            return
        lease_id, tenant_id = uuid.uuid4().hex, principal.tenant_id
        self._checked(await self._ask(self._limiter.lease(
            tenant_id=tenant_id, lease_id=lease_id, cap=cap, ttl_s=self._lease_ttl_s)))
        try:
            yield
        finally:
            # Released even when the answer never came: a lease taken by a script whose
            # reply timed out would otherwise hold the tenant's slot until it expires.
            await self._release(tenant_id, lease_id)

    async def _ask(self, call: Awaitable[QuotaDecision]) -> QuotaDecision | None:
        """The limiter's answer, or None (fail-open) when it fails or is slow."""
        answer: QuotaDecision | None = await degraded.fallback(
            "redis", self._bounded(call), None, "quota check")
        if answer is None:
            self._metrics.quota_unavailable.inc()
        return answer

    async def _release(self, tenant_id: str, lease_id: str) -> None:
        # Never fails the turn it ends: a lease not released expires after lease_ttl_s.
        try:
            await self._bounded(self._limiter.release(tenant_id=tenant_id, lease_id=lease_id))
        except Exception:
            log.warning("quota lease release failed; it expires by itself", exc_info=True)

    async def _bounded(self, call: Awaitable[T]) -> T:
        async with asyncio.timeout(self._timeout_s):
            return await call

    def _checked(self, decision: QuotaDecision | None) -> QuotaDecision | None:
        if decision is None or decision.allowed:
            return decision
        self._metrics.quota_rejections.labels(limit=decision.limit.value).inc()
        raise QuotaExceeded(f"{_WHAT[decision.limit]} is at its quota of {decision.quota}; "
                            f"retry after the wait", retry_after_s=decision.retry_after_s,
                            decision=decision)
