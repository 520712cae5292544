"""Background jobs owned by a service: at most one in flight per key, a bound on all of them,
cancelled together when the service closes.

``start(key, work)`` runs ``work()`` as an asyncio task unless one is already in flight for
``key`` (then that one is returned: a caller joins it instead of starting a second), or
``limit`` jobs are in flight (then None: the caller goes without, and a later call tries
again). A finished job leaves the set by itself. ``close()`` cancels every job and waits for
them to unwind, so nothing outlives the stores it uses. A job is expected to handle its own
failures; one that raises anyway is logged here, never left unretrieved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Hashable
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
