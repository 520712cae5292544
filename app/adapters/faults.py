"""Which dependency an exception says is down: the one classification of driver errors.

``dependency_of(exc)`` walks the exception and its causes and answers ``"postgres"`` or
``"redis"`` when one of them is a connection-level fault of that driver — the server
unreachable, restarting or shutting down, the connection lost mid-statement, too many
clients — and None for anything else (a bug, a constraint violation, bad SQL stay 500s). A
bare ``OSError`` (``ConnectionRefusedError`` when asyncpg connects, a reset socket) is
attributed by the frames it was raised through; raised outside both drivers it is not a
dependency fault.

``fault_of(exc)`` is the same walk with the fault's ``kind`` too, a word from ``KINDS`` (the
``kind`` label of ``ctxgate_dependency_errors_total``):

    postgres  connect               unreachable, refused, or the handshake failed (08xxx)
              connection_lost       the connection died mid-statement (or was left broken)
              shutdown              the server is shutting down or not accepting yet (57P0x)
              too_many_connections  53300: the server's slots are taken
    redis     connect               unreachable, refused, reset
              timeout               no answer within the socket timeout
              loading               the server is loading its dataset
"""

from __future__ import annotations

import traceback
from typing import NamedTuple

import asyncpg
from redis import exceptions as redis_errors

POSTGRES_FAULTS: tuple[type[Exception], ...] = (
    asyncpg.PostgresConnectionError,  # SQLSTATE class 08
    asyncpg.exceptions.OperatorInterventionError,  # 57P01-57P03: shutdown, cannot connect now
    asyncpg.exceptions.TooManyConnectionsError,  # 53300: another service took the slots
    asyncpg.exceptions.ConnectionDoesNotExistError,  # the connection died mid-statement
    # A pooled connection whose server died while an operation was in flight is left with
    # that operation "in progress" (asyncpg's protocol state): the next use on it fails so;
    # and the pool may hand out a proxy of a connection it already took back after a kill
    # ("released back to the pool", tests/faults/test_statement_boundaries.py). Both are the
    # aftermath of a lost server connection; the retry gets a fresh one.
    asyncpg.exceptions.InternalClientError,
    asyncpg.InterfaceError,
)
REDIS_FAULTS: tuple[type[Exception], ...] = (
    redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError)
# Every class a handler is registered for (app.api.errors); OSError is narrowed below.
FAULT_TYPES: tuple[type[Exception], ...] = (*POSTGRES_FAULTS, *REDIS_FAULTS, OSError)
_MAX_CHAIN = 8
# The first class that matches names the kind: a subclass before its base.
_KINDS: tuple[tuple[str, type[Exception], str], ...] = (
    ("postgres", asyncpg.exceptions.ConnectionDoesNotExistError, "connection_lost"),
    ("postgres", asyncpg.exceptions.InternalClientError, "connection_lost"),
    ("postgres", asyncpg.InterfaceError, "connection_lost"),
    ("postgres", asyncpg.PostgresConnectionError, "connect"),
    ("postgres", asyncpg.exceptions.OperatorInterventionError, "shutdown"),
    ("postgres", asyncpg.exceptions.TooManyConnectionsError, "too_many_connections"),
    ("redis", redis_errors.BusyLoadingError, "loading"),
    ("redis", redis_errors.TimeoutError, "timeout"),
    ("redis", redis_errors.ConnectionError, "connect"),
)
KINDS: dict[str, tuple[str, ...]] = {
    "postgres": ("connect", "connection_lost", "shutdown", "too_many_connections"),
    "redis": ("connect", "timeout", "loading"),
}


class Fault(NamedTuple):
    dependency: str  # "postgres" | "redis"
    kind: str  # one of KINDS[dependency]


def _by_frames(exc: BaseException) -> str | None:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "/asyncpg/" in frame.filename:
            return "postgres"
        if "/redis/" in frame.filename:
            return "redis"
    return None


def fault_of(exc: BaseException) -> Fault | None:
    seen: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if seen is None:
            return None
        for dependency, cls, kind in _KINDS:
            if isinstance(seen, cls):
                return Fault(dependency, kind)
        if isinstance(seen, OSError) and (found := _by_frames(seen)) is not None:
            return Fault(found, "connect")
        seen = seen.__cause__ or seen.__context__
    return None


def dependency_of(exc: BaseException) -> str | None:
    fault = fault_of(exc)
    return fault.dependency if fault is not None else None
