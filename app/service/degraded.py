"""Which optional dependencies one request went without, recorded where it happens.

Redis is a cache in front of the archive: a turn that cannot reach it reads the archive
instead, skips the replay entry and the pin snapshot, and answers 200 — but it must *say* it
was degraded (the manifest's ``degraded``, a metric). The services that fall back are deep in
the call tree and run concurrently (``asyncio.gather`` copies the context, not the set), so
``recording()`` puts one mutable set in a context variable for the request and ``note(dep)``
adds to it from wherever the fallback is taken. Outside ``recording()`` a note is dropped.

``fallback(dep, call, default)`` is the one shape of "try the cache, else go on": it awaits
``call``, and on any ``Exception`` logs it, notes ``dep`` and returns ``default``. Only for
calls whose failure loses nothing durable (caches, snapshots, replay entries).

``errors()`` likewise collects the exceptions behind those notes, so their kinds can be
counted (``ctxgate_dependency_errors_total``) by the one who opened it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

_current: ContextVar[set[str] | None] = ContextVar("ctxgate_degraded", default=None)
Noted = tuple[str, BaseException]  # (dependency, what it raised)
_errors: ContextVar[list[Noted] | None] = ContextVar("ctxgate_degraded_errors", default=None)


@contextmanager
def recording() -> Iterator[set[str]]:
    """The set of dependencies this request went without, filled while the block runs.
    Inside another recording it is the outer set: what the route went without before the
    service began (the quota check) still reaches the turn's manifest."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    deps: set[str] = set()
    token = _current.set(deps)
    try:
        yield deps
    finally:
        _current.reset(token)


@contextmanager
def errors() -> Iterator[list[Noted]]:
    """The errors noted while the block runs, with the dependency each came from."""
    noted: list[Noted] = []
    token = _errors.set(noted)
    try:
        yield noted
    finally:
        _errors.reset(token)


def note(dependency: str, error: BaseException | None = None) -> None:
    deps = _current.get()
    if deps is not None:
        deps.add(dependency)
    noted = _errors.get()
    if noted is not None and error is not None:
        noted.append((dependency, error))


async def fallback(dependency: str, call: Awaitable[T], default: T, what: str) -> T:
    try:
        return await call
    except Exception as exc:
        log.warning("%s failed (%s unreachable?); going on without it", what, dependency,
                    exc_info=True)
        note(dependency, exc)
        return default
