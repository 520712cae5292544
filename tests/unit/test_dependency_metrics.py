"""Fault kinds, breaker counts and the probes that feed the dependency metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from prometheus_client import CollectorRegistry
from redis import exceptions as redis_errors

from app.adapters import faults
from app.core.compaction.breaker import Breaker, BreakerPolicy, Phase
from app.dependency_metrics import DependencyMetrics
from app.service.breakers import BreakerBoard


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, (name, labels)
    return value


@pytest.mark.parametrize(("exc", "fault"), [
    (asyncpg.exceptions.ConnectionDoesNotExistError("gone"), ("postgres", "connection_lost")),
    (asyncpg.InterfaceError("released back to the pool"), ("postgres", "connection_lost")),
    (asyncpg.exceptions.ConnectionFailureError("refused"), ("postgres", "connect")),
    (asyncpg.exceptions.AdminShutdownError("bye"), ("postgres", "shutdown")),
    (asyncpg.exceptions.CannotConnectNowError("starting"), ("postgres", "shutdown")),
    (asyncpg.exceptions.TooManyConnectionsError("full"), ("postgres", "too_many_connections")),
    (redis_errors.BusyLoadingError("loading"), ("redis", "loading")),
    (redis_errors.TimeoutError("slow"), ("redis", "timeout")),
    (redis_errors.ConnectionError("refused"), ("redis", "connect")),
    (ValueError("a bug"), None),
    (asyncpg.exceptions.UniqueViolationError("dup"), None),
])
def test_fault_kinds(exc: Exception, fault: tuple[str, str] | None) -> None:
    assert faults.fault_of(exc) == fault
    assert faults.dependency_of(exc) == (fault[0] if fault else None)


def test_a_fault_behind_another_exception_keeps_its_kind() -> None:
    outer = RuntimeError("wrapped")
    outer.__cause__ = redis_errors.TimeoutError("slow")
    assert faults.fault_of(outer) == ("redis", "timeout")


def test_every_fault_class_has_a_listed_kind() -> None:
    for cls in (*faults.POSTGRES_FAULTS, *faults.REDIS_FAULTS):
        fault = faults.fault_of(cls("x"))
        assert fault is not None and fault.kind in faults.KINDS[fault.dependency], cls


def test_failed_counts_by_dependency_and_kind_else_other() -> None:
    r = CollectorRegistry()
    deps = DependencyMetrics(r, classify=faults.fault_of, kinds=faults.KINDS)
    deps.failed(redis_errors.TimeoutError("slow"))
    deps.failed(redis_errors.ResponseError("WRONGTYPE"), "redis")  # not a connection fault
    deps.failed(ValueError("a bug"))  # nobody's: not counted
    name = "ctxgate_dependency_errors_total"
    assert _value(r, name, dependency="redis", kind="timeout") == 1
    assert _value(r, name, dependency="redis", kind="other") == 1
    assert _value(r, name, dependency="postgres", kind="connect") == 0  # exported at zero
    assert sum(s.value for m in r.collect() if m.name == "ctxgate_dependency_errors"
               for s in m.samples if s.name.endswith("_total")) == 2


def test_follow_feeds_a_counter_the_increase_of_a_running_total() -> None:
    r = CollectorRegistry()
    deps = DependencyMetrics(r)
    hits = [0]
    deps.follow_cache("detector", hits=lambda: hits[0], misses=lambda: 0)
    for total in (3, 3, 10, 2, 5):  # 2: the total was reset (a new cache)
        hits[0] = total
        deps.refresh()
    assert _value(r, "ctxgate_cache_lookups_total", cache="detector", result="hit") == 13


def test_pool_and_breaker_gauges() -> None:
    r = CollectorRegistry()
    deps = DependencyMetrics(r)
    deps.observe_pool(max_size=10, connections=4, in_use=3, waiting=2)
    deps.observe_breakers({"open": 2})
    assert _value(r, "ctxgate_db_pool_max_connections") == 10
    assert _value(r, "ctxgate_db_pool_connections") == 4
    assert _value(r, "ctxgate_db_pool_connections_in_use") == 3
    assert _value(r, "ctxgate_db_pool_waiting_requests") == 2
    assert _value(r, "ctxgate_compaction_breaker_sessions", state="open") == 2
    assert _value(r, "ctxgate_compaction_breaker_sessions", state="half_open") == 0


T0 = datetime(2026, 12, 4, tzinfo=UTC)


def test_breaker_board_counts_open_and_half_open_by_the_clock() -> None:
    policy = BreakerPolicy(cooldown=timedelta(minutes=5))
    board = BreakerBoard(policy, max_sessions=2)
    opened = Breaker(failures=3, opened_at=T0)
    board.saw(("t", "s1"), opened, T0)
    board.saw(("t", "s2"), Breaker(failures=1), T0)  # closed: not kept
    assert board.counts(T0) == {Phase.OPEN: 1, Phase.HALF_OPEN: 0}
    assert board.counts(T0 + timedelta(minutes=6)) == {Phase.OPEN: 0, Phase.HALF_OPEN: 1}
    board.saw(("t", "s2"), opened, T0)
    board.saw(("t", "s3"), opened, T0)  # over the bound: s1, seen least lately, goes
    board.saw(("t", "s2"), Breaker(), T0)  # closed again (a reset)
    assert board.counts(T0) == {Phase.OPEN: 1, Phase.HALF_OPEN: 0}
