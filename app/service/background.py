"""Background jobs owned by a service: at most one in flight per key, a bound on all of them,
cancelled together when the service closes.

``start(key, work)`` runs ``work()`` as an asyncio task unless one is already in flight for
``key`` (then that one is returned: a caller joins it instead of starting a second), or
``limit`` jobs are in flight (then None: the caller goes without, and a later call tries
again). A finished job leaves the set by itself. ``close()`` cancels every job and waits for
them to unwind, so nothing outlives the stores it uses. A job is expected to handle its own
failures; one that raises anyway is logged here, never left unretrieved.

``Poller`` runs one coroutine function every ``interval_s`` or at once on ``kick()``: the
loop of a durable job queue's worker (erasure, ingest).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class KeyedJobs(Generic[K, T]):
    def __init__(self, *, limit: int, name: str) -> None:
        self._limit = limit
        self._name = name
        self._tasks: dict[K, asyncio.Task[T]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def running(self, key: K) -> asyncio.Task[T] | None:
        """The job in flight for ``key``, if any."""
        task = self._tasks.get(key)
        return task if task is not None and not task.done() else None

    def start(self, key: K, work: Callable[[], Coroutine[Any, Any, T]]
              ) -> asyncio.Task[T] | None:
        """The job in flight for ``key``, or a new one running ``work()``; None when the
        bound is reached (``work`` is then not called)."""
        task = self.running(key)
        if task is not None:
            return task
        if len(self._tasks) >= self._limit:
            return None
        task = asyncio.get_running_loop().create_task(work(), name=f"{self._name}:{key}")
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))
        return task

    def _finished(self, key: K, task: asyncio.Task[T]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("%s job failed", self._name, exc_info=task.exception())

    async def close(self) -> None:
        """Cancel every job in flight and wait until each has unwound."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()


class Poller:
    """An asyncio task that awaits ``poll()`` every ``interval_s``, or at once on ``kick()``;
    a poll that raises is logged and the next one runs (a database hiccup must not end it)."""

    def __init__(self, poll: Callable[[], Awaitable[object]], *, interval_s: float,
                 name: str) -> None:
        self._poll = poll
        self._interval_s = interval_s
        self._name = name
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def kick(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name=self._name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            try:
                await self._poll()
            except Exception:
                log.exception("%s poll failed", self._name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval_s)
            self._wake.clear()

