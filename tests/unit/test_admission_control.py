"""Admission control: at most ``limit`` turns at once, the rest shed at once with a 503 that
says when to retry; a slot freed within the wait is taken."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from app.core.errors import Overloaded
from app.observability import Metrics
from app.service.admission import Admission


def admission(limit: int, wait_s: float = 0.01) -> tuple[Admission, Metrics]:
    metrics = Metrics(CollectorRegistry())
    return Admission(limit=limit, wait_s=wait_s, metrics=metrics, retry_after_s=2), metrics


async def test_past_the_limit_a_turn_is_shed_and_counted() -> None:
    gate, metrics = admission(2)
    release = asyncio.Event()

    async def turn() -> None:
        async with gate.slot():
            await release.wait()

    running = [asyncio.create_task(turn()) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(Overloaded) as shed:
        async with gate.slot():
            pass
    assert shed.value.retry_after_s == 2 and shed.value.type == "overloaded"
    assert metrics.turns_shed._value.get() == 1
    release.set()
    await asyncio.gather(*running)
    async with gate.slot():  # the slots came back
        pass


async def test_a_slot_freed_within_the_wait_is_taken() -> None:
    gate, _ = admission(1, wait_s=1.0)

    async def short() -> None:
        async with gate.slot():
            await asyncio.sleep(0.05)

    first = asyncio.create_task(short())
    await asyncio.sleep(0)
    async with gate.slot():  # waits for the first, does not fail
        pass
    await first


async def test_a_failing_turn_gives_its_slot_back_and_zero_means_no_limit() -> None:
    gate, _ = admission(1)
    with pytest.raises(RuntimeError):
        async with gate.slot():
            raise RuntimeError("boom")
    async with gate.slot():
        pass
    unlimited, _ = admission(0)
    async with unlimited.slot(), unlimited.slot():
        pass
