"""Which dependency an exception says is down: the one classification of driver errors.

``dependency_of(exc)`` walks the exception and its causes and answers ``"postgres"`` or
``"redis"`` when one of them is a connection-level fault of that driver — the server
unreachable, restarting or shutting down, the connection lost mid-statement, too many
clients — and None for anything else (a bug, a constraint violation, bad SQL stay 500s). A
bare ``OSError`` (``ConnectionRefusedError`` when asyncpg connects, a reset socket) is
attributed by the frames it was raised through; raised outside both drivers it is not a
dependency fault.
"""

from __future__ import annotations

import traceback

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


def _by_frames(exc: BaseException) -> str | None:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "/asyncpg/" in frame.filename:
            return "postgres"
        if "/redis/" in frame.filename:
            return "redis"
    return None


def dependency_of(exc: BaseException) -> str | None:
    seen: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if seen is None:
            return None
        if isinstance(seen, POSTGRES_FAULTS):
            return "postgres"
        if isinstance(seen, REDIS_FAULTS):
            return "redis"
        if isinstance(seen, OSError) and (found := _by_frames(seen)) is not None:
            return found
        seen = seen.__cause__ or seen.__context__
    return None
