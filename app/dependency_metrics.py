"""Metrics of what a turn leans on: the in-process caches, the database pool, PostgreSQL and
Redis faults, and the compaction breakers.

Their owners keep the numbers (a cache its hit count, the pool its sizes, the compaction
service the breakers it saw); ``probe(fn)`` registers a function that copies them into the
collectors, and ``refresh()`` runs every probe: on each scrape, and after each turn so that
under several workers (``PROMETHEUS_MULTIPROC_DIR``) every worker's files stay current, not
only the scraped one's. A running total kept elsewhere reaches a counter as its increase
(``follow``), so the counter stays monotonic and ``rate()`` works on it.

Labels are bounded words: ``cache`` (detector, embedding), ``result`` (hit, miss),
``dependency`` and ``kind`` (``app.adapters.faults.KINDS``, plus ``other`` for an error the
classification does not know), breaker ``state`` (open, half_open). Never a tenant, key or
session id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

Probe = Callable[[], None]
Classify = Callable[[BaseException], tuple[str, str] | None]  # (dependency, kind)
CACHES = ("detector", "embedding")
BREAKER_STATES = ("open", "half_open")


def _unclassified(_: BaseException) -> None:
    return None


class DependencyMetrics:
    def __init__(self, registry: CollectorRegistry, *, classify: Classify | None = None,
                 kinds: Mapping[str, Sequence[str]] | None = None) -> None:
        """``classify`` and ``kinds``: the fault classification (``app.adapters.faults``,
        which this module may not import: services import it)."""
        r = registry
        self._classify = classify or _unclassified
        self._kinds = {dep: (*ks, "other") for dep, ks in (kinds or {}).items()}
        self._probes: list[Probe] = []
        self.cache_lookups = Counter(
            "ctxgate_cache_lookups", "Lookups in the in-process caches, per cache (detector: "
            "findings by content; embedding: query vectors by text) and result (hit, miss).",
            ["cache", "result"], registry=r)
        self.pool_max = Gauge(
            "ctxgate_db_pool_max_connections", "The database pool's ceiling (db_pool_size).",
            registry=r, multiprocess_mode="livesum")
        self.pool_open = Gauge(
            "ctxgate_db_pool_connections", "Connections the database pool holds open, in use "
            "or idle.", registry=r, multiprocess_mode="livesum")
        self.pool_in_use = Gauge(
            "ctxgate_db_pool_connections_in_use", "Pooled connections checked out now.",
            registry=r, multiprocess_mode="livesum")
        self.pool_waiting = Gauge(
            "ctxgate_db_pool_waiting_requests", "Callers waiting for a pooled connection now.",
            registry=r, multiprocess_mode="livesum")
        self.pool_timeouts = Counter(
            "ctxgate_db_pool_timeouts", "Waits for a pooled connection that ran past the pool "
            "timeout (503 store-busy).", registry=r)
        self.dependency_errors = Counter(
            "ctxgate_dependency_errors", "PostgreSQL and Redis faults, per dependency and kind "
            "(app.adapters.faults): requests that failed with 503 dependency-unavailable, and "
            "Redis calls a turn went on without (degraded).", ["dependency", "kind"],
            registry=r)
        self.replica_reads = Counter(
            "ctxgate_replica_reads", "Turns whose read-only transaction ran on the read "
            "replica (reason=replica), or on the primary and why: lagging (past "
            "replica_max_lag_s), unreachable, behind-write (the tenant's latest write not "
            "replayed yet), fence-unknown (Redis did not say). Only with a replica set.",
            ["reason"], registry=r)
        self.replica_fence_failures = Counter(
            "ctxgate_replica_fence_failures", "Writes whose read-your-writes fence could not be "
            "recorded (Redis, or the connection lost after the commit): each waited out "
            "replica_max_lag_s before answering. Only with a replica set.", registry=r)
        self.breakers = Gauge(
            "ctxgate_compaction_breaker_sessions", "Sessions whose compaction breaker is open "
            "or half_open now, of those this worker served lately (summed over workers).",
            ["state"], registry=r, multiprocess_mode="livesum")
        for cache in CACHES:
            for result in ("hit", "miss"):
                self.cache_lookups.labels(cache=cache, result=result)
        for dependency, known in self._kinds.items():
            for kind in known:
                self.dependency_errors.labels(dependency=dependency, kind=kind)
        for state in BREAKER_STATES:
            self.breakers.labels(state=state)

    def probe(self, fn: Probe) -> None:
        self._probes.append(fn)

    def refresh(self) -> None:
        for fn in self._probes:
            fn()

    def follow(self, counter: Counter, total: Callable[[], int]) -> None:
        """Feed ``counter`` the increase of ``total()`` at every refresh."""
        seen = [0]

        def step() -> None:
            now = total()
            if now > seen[0]:
                counter.inc(now - seen[0])
            seen[0] = now  # (a total that went back was reset: count on from there)

        self.probe(step)

    def follow_cache(self, cache: str, *, hits: Callable[[], int],
                     misses: Callable[[], int]) -> None:
        self.follow(self.cache_lookups.labels(cache=cache, result="hit"), hits)
        self.follow(self.cache_lookups.labels(cache=cache, result="miss"), misses)

    def observe_pool(self, *, max_size: int, connections: int, in_use: int,
                     waiting: int) -> None:
        self.pool_max.set(max_size)
        self.pool_open.set(connections)
        self.pool_in_use.set(in_use)
        self.pool_waiting.set(waiting)

    def observe_breakers(self, counts: Mapping[str, int]) -> None:
        for state in BREAKER_STATES:
            self.breakers.labels(state=state).set(counts.get(state, 0))

    def failed(self, exc: BaseException, dependency: str | None = None) -> None:
        """Count one fault: its dependency and kind as classified, else ``dependency`` (the
        one the caller was talking to) with kind ``other``; neither: not a dependency's."""
        fault = self._classify(exc)
        if fault is None and dependency in self._kinds:
            fault = (dependency, "other")
        if fault is not None:
            self.dependency_errors.labels(dependency=fault[0], kind=fault[1]).inc()
