"""The compaction circuit breaker of one session, as a pure state machine.

Contract: ``Breaker(failures, opened_at)`` is the state a session's latest compaction row
carries (``consecutive_failures`` and the record's ``breaker_opened_at``); the functions below
take the current time as an argument (the service passes its clock in: no clock here).

    closed     failures < threshold: a compaction may try the model (threshold - failures
               attempts are left before it opens)
    open       failures >= threshold and the cool-down has not elapsed since ``opened_at``:
               no model call; the session is served the reference view (by handle)
    half_open  failures >= threshold and the cool-down has elapsed: one probe attempt; a
               valid summary closes the breaker, a failure re-opens it (the cool-down
               starts again from that failure)

Every failure counts: a summary that fails validation, a model that times out, refuses
(HTTP 429/5xx), is unreachable or answers garbage. An admin reset closes it at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

THRESHOLD = 3  # consecutive failures (the seeds: "连续 3 次校验失败熔断")


class Phase(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerPolicy:
    cooldown: timedelta
    threshold: int = THRESHOLD


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    failures: int = 0  # consecutive failed attempts
    opened_at: datetime | None = None  # when it last opened (None while closed)


CLOSED = Breaker()


def phase(state: Breaker, policy: BreakerPolicy, now: datetime) -> Phase:
    """An open breaker without ``opened_at`` (a row older than the cool-down) is half-open."""
    if state.failures < policy.threshold:
        return Phase.CLOSED
    if state.opened_at is not None and now - state.opened_at < policy.cooldown:
        return Phase.OPEN
    return Phase.HALF_OPEN


def failures_so_far(state: Breaker, policy: BreakerPolicy, now: datetime) -> int:
    """What the lifecycle is told came before (``compaction_steps(failures_so_far=...)``), so
    that it makes exactly the attempts the phase allows: closed ``threshold - failures``,
    half-open one probe, open none."""
    match phase(state, policy, now):
        case Phase.CLOSED:
            return state.failures
        case Phase.HALF_OPEN:
            return policy.threshold - 1
        case Phase.OPEN:
            return policy.threshold


def settle(state: Breaker, policy: BreakerPolicy, now: datetime, *, failures: int) -> Breaker:
    """The state after a run that ended with ``failures`` consecutive failures (0: it
    succeeded). Opening stamps ``now``; a breaker that stays open keeps its ``opened_at``."""
    if failures < policy.threshold:
        return CLOSED if failures == 0 else Breaker(failures=failures)
    if phase(state, policy, now) is Phase.OPEN:
        return Breaker(failures=failures, opened_at=state.opened_at)
    return Breaker(failures=failures, opened_at=now)


def retry_after(state: Breaker, policy: BreakerPolicy, now: datetime) -> timedelta:
    """How long until a compaction may call the model again: the rest of the cool-down
    while open, else nothing."""
    if phase(state, policy, now) is not Phase.OPEN or state.opened_at is None:
        return timedelta(0)
    return state.opened_at + policy.cooldown - now
