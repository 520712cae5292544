"""Per-tenant quotas: which limits apply to a caller, and what the limiter answered.

Contract:
- ``QuotaLimits`` are the limits in force: a token bucket per tenant (``requests_per_s``
  refilled, ``requests_burst`` held), one per API key inside it (``key_requests_per_s``; its
  bucket holds as many seconds' worth as the tenant's), and a cap on the tenant's turns in
  flight across every replica (``turns_concurrent``). 0 turns a limit off.
- ``effective(defaults, override, pool_size=...)`` is the server's defaults with a tenant's
  overrides (``None``: the default) laid over them. A cap on turns in flight is kept below
  the database pool of one worker (at most ``pool_size - 1``), whatever the override says: a
  tenant whose every turn landed on one worker still leaves a connection to the others.
- ``QuotaDecision`` is one answer of the limiter, for the RateLimit headers and the 429.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TypeVar

T = TypeVar("T", int, float)


class Limit(StrEnum):
    """Which limit an answer is about: the metric's label and the RateLimit policy's name."""

    TENANT_RATE = "tenant_rate"
    KEY_RATE = "key_rate"
    TURNS = "turns_concurrent"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaOverride:
    """A tenant's own limits (tenant settings); ``None`` keeps the server's default."""

    requests_per_s: float | None = None
    requests_burst: int | None = None
    key_requests_per_s: float | None = None
    turns_concurrent: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaLimits:
    requests_per_s: float
    requests_burst: int
    key_requests_per_s: float
    turns_concurrent: int

    @property
    def key_requests_burst(self) -> int:
        """A key's bucket holds the same seconds' worth of requests as its tenant's."""
        if self.key_requests_per_s <= 0:
            return 0
        if self.requests_per_s <= 0:
            return max(1, math.ceil(self.key_requests_per_s))
        seconds = self.requests_burst / self.requests_per_s
        return max(1, math.ceil(self.key_requests_per_s * seconds))


def effective(defaults: QuotaLimits, override: QuotaOverride, *, pool_size: int) -> QuotaLimits:
    """The limits in force for a tenant (see the module docstring)."""
    chosen = replace(
        defaults,
        requests_per_s=_pick(override.requests_per_s, defaults.requests_per_s),
        requests_burst=_pick(override.requests_burst, defaults.requests_burst),
        key_requests_per_s=_pick(override.key_requests_per_s, defaults.key_requests_per_s),
        turns_concurrent=_pick(override.turns_concurrent, defaults.turns_concurrent))
    return replace(chosen, turns_concurrent=min(chosen.turns_concurrent, max(1, pool_size - 1)),
                   requests_burst=max(1, chosen.requests_burst))


def _pick(value: T | None, default: T) -> T:
    return default if value is None else value


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaDecision:
    """One answer: ``allowed``, or refused by ``limit``; ``quota``/``remaining`` of that limit
    (of the tenant's bucket when allowed), ``reset_s`` until that bucket is full again (or a
    lease frees up), ``retry_after_s`` until a refused request may succeed, ``window_s`` the
    time an empty bucket takes to fill (None: a cap on turns in flight, not a rate)."""

    allowed: bool
    limit: Limit
    quota: int
    remaining: int
    reset_s: float
    retry_after_s: float = 0.0
    window_s: float | None = None
