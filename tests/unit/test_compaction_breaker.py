"""The compaction breaker as a state machine (a clock passed in), the background job set, and
the lifecycle holding a model's summary to the committed constraints."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.core.compaction import Options, Origin, SummaryRequest, run_compaction
from app.core.compaction.breaker import (
    CLOSED,
    Breaker,
    BreakerPolicy,
    Phase,
    failures_so_far,
    phase,
    retry_after,
    settle,
)
from app.core.model import SessionEvent
from app.service.background import KeyedJobs

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
POLICY = BreakerPolicy(cooldown=timedelta(seconds=30))


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def test_closed_until_the_threshold_then_open_then_half_open_after_the_cooldown() -> None:
    clock = Clock()
    state = CLOSED
    for n in (1, 2):
        state = settle(state, POLICY, clock.now, failures=n)
        assert phase(state, POLICY, clock.now) is Phase.CLOSED
        assert failures_so_far(state, POLICY, clock.now) == n  # 3 - n attempts left
    state = settle(state, POLICY, clock.advance(1), failures=3)
    assert state == Breaker(failures=3, opened_at=T0 + timedelta(seconds=1))
    assert phase(state, POLICY, clock.now) is Phase.OPEN
    assert failures_so_far(state, POLICY, clock.now) == 3  # no attempt while open
    assert retry_after(state, POLICY, clock.advance(10)) == timedelta(seconds=20)
    assert phase(state, POLICY, clock.advance(19.999)) is Phase.OPEN
    assert phase(state, POLICY, clock.advance(0.001)) is Phase.HALF_OPEN
    assert failures_so_far(state, POLICY, clock.now) == 2  # exactly one probe
    assert retry_after(state, POLICY, clock.now) == timedelta(0)


def test_a_successful_probe_closes_it() -> None:
    clock = Clock()
    state = settle(CLOSED, POLICY, clock.now, failures=3)
    clock.advance(30)
    assert phase(state, POLICY, clock.now) is Phase.HALF_OPEN
    assert settle(state, POLICY, clock.now, failures=0) == CLOSED


def test_a_failed_probe_reopens_it_and_the_cooldown_starts_again() -> None:
    clock = Clock()
    state = settle(CLOSED, POLICY, clock.now, failures=3)
    probe_at = clock.advance(45)
    state = settle(state, POLICY, probe_at, failures=3)
    assert state.opened_at == probe_at
    assert phase(state, POLICY, clock.advance(29)) is Phase.OPEN
    assert phase(state, POLICY, clock.advance(1)) is Phase.HALF_OPEN


def test_staying_open_keeps_when_it_opened() -> None:
    """A reference view recorded while open does not push the half-open moment back."""
    clock = Clock()
    state = settle(CLOSED, POLICY, clock.now, failures=3)
    again = settle(state, POLICY, clock.advance(20), failures=3)
    assert again.opened_at == T0
    assert phase(again, POLICY, clock.advance(10)) is Phase.HALF_OPEN


def test_an_open_state_without_a_time_is_half_open() -> None:
    """A row written before the breaker kept ``breaker_opened_at``: allowed one probe."""
    assert phase(Breaker(failures=3), POLICY, T0) is Phase.HALF_OPEN


def test_a_custom_threshold() -> None:
    policy = BreakerPolicy(cooldown=timedelta(seconds=1), threshold=1)
    state = settle(CLOSED, policy, T0, failures=1)
    assert phase(state, policy, T0) is Phase.OPEN


class _Dropper:
    """A 'model' that answers with a plausible summary that drops the qualifier."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        return "The discount applies to orders [session://s1/events/1]"


QUALIFIER = "The discount applies only before 2026-06-30, channel customers excepted."


def _events() -> list[SessionEvent]:
    events = [SessionEvent(seq=0, type="message", role="user", content="Answer pricing."),
              SessionEvent(seq=1, type="message", role="user", content=QUALIFIER)]
    return events + [SessionEvent(seq=i, type="message", role="user" if i % 2 else "assistant",
                                  content=f"filler {i} " * 20) for i in range(2, 40)]


@pytest.mark.parametrize("strict", [True, False])
def test_a_model_summary_must_carry_the_committed_constraints(strict: bool) -> None:
    """Held to it, a summary without the constraint fails validation on every attempt and
    the breaker opens: it is not what the outcome serves. Not held to it (the extractive
    path), the checkpoint in the view carries the constraint and the run completes."""
    model = _Dropper()
    out = run_compaction(_events(), None, origin=Origin(session_id="s1"), budget_tokens=300,
                         keep_recent=4, summarizer=model, count_tokens=lambda t: len(t) // 4,
                         options=Options(summary_carries_constraints=strict))
    if strict:
        assert out.action == "compaction.breaker_open" and model.calls == 3
        assert out.consecutive_failures == 3 and out.view.mode == "reference"
        assert out.check is not None and not out.check.ok
        failed = {c.type for c in out.check.checks if not c.ok}
        assert "compaction.summary_constraints_verbatim" in failed
    else:
        assert out.action == "compaction.completed" and model.calls == 1
    assert QUALIFIER in out.view.text


async def test_jobs_one_per_key_bounded_and_cancelled_on_close() -> None:
    jobs: KeyedJobs[str, int] = KeyedJobs(limit=2, name="test")
    gate = asyncio.Event()
    started: list[str] = []

    def work(key: str) -> Callable[[], Coroutine[Any, Any, int]]:
        async def run() -> int:
            started.append(key)
            await gate.wait()
            return len(key)
        return run

    a = jobs.start("a", work("a"))
    assert a is not None and jobs.start("a", work("a")) is a  # joined, not started twice
    b = jobs.start("bb", work("bb"))
    assert b is not None and jobs.start("ccc", work("ccc")) is None  # the bound
    await asyncio.sleep(0)
    assert started == ["a", "bb"] and len(jobs) == 2
    gate.set()
    assert await a == 1 and await b == 2
    await asyncio.sleep(0)
    assert len(jobs) == 0 and jobs.running("a") is None
    gate.clear()
    c = jobs.start("ccc", work("ccc"))
    assert c is not None
    await jobs.close()
    assert c.cancelled() and len(jobs) == 0
