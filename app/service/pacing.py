"""Pacing for background work that shares the CPU with turns (the embedding model).

``DutyCycle(duty, min_pause_s)``: ``async with cycle.step():`` around one unit of work (a
batch); after it, the step sleeps ``max(min_pause_s, t * (1 - duty) / duty)`` where ``t`` is
how long the work took, so the job is busy at most ``duty`` of the time and turns get the rest
(unpaced, re-embedding more than doubled the turn p50 on two cores: docs/embeddings.md). The
sleep is skipped when the work raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable


class DutyCycle:
    def __init__(self, *, duty: float, min_pause_s: float,
                 timer: Callable[[], float] = time.monotonic) -> None:
        if not 0 < duty <= 1:
            raise ValueError("duty must be in (0, 1]")
        self._rest = (1 - duty) / duty  # pause per second of work
        self._min_pause_s = min_pause_s
        self._timer = timer

    @contextlib.asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        began = self._timer()
        yield
        await asyncio.sleep(max(self._min_pause_s, (self._timer() - began) * self._rest))
