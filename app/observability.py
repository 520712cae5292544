"""Prometheus metrics and OpenTelemetry tracing for one app instance.

Nothing is built at import time. ``Metrics()`` owns its collectors in its own
``CollectorRegistry``, so two apps (or two tests) in one process never collide, and
``render()`` serves exactly that registry. ``make_tracer_provider`` builds a private
``TracerProvider`` and never installs it globally (``app.tracing`` decides where spans go).

Metric and label words are the manifest's words: candidates per memory ``layer`` (turn,
session, task, ...), drops per drop ``layer`` (permission, safety, relevance, dedupe, budget),
tokens per envelope ``section``. Spans carry counts only — never payloads or user content —
and a failed stage records the exception *type*, not its message (which may quote content).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from app.core.canaries import LEAK_KINDS
from app.core.guards.relevance import noise
from app.core.model import DropLayer, Layer, Section
from app.core.quotas import Limit
from app.dependency_metrics import Classify, DependencyMetrics

if TYPE_CHECKING:
    from app.core.compaction import CompactionOutcome
    from app.core.model import Assembly, Candidate

TRACER_NAME = "ctxgate"

# Seconds. Requests include store round trips; stages are mostly sub-millisecond CPU work.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STAGE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
# The seeds' three context actions (000 §四): pruning (old tool results trimmed in the view),
# compaction (older turns become a validated summary) and archive (the breaker's reference
# view: older turns are served as archive handles). Failure reasons: the summarizer's
# (app.ports.SummaryFailure), ``validation`` and ``conflict`` (a concurrent
# checkpoint write).
CONTEXT_ACTIONS = ("pruning", "compaction", "archive")
COMPACTION_FAILURES = ("timeout", "unreachable", "http_status", "bad_response", "validation",
                       "conflict")
COMPACTION_VIEWS = ("new", "stored", "extractive", "reference")
# The tables the retention job reports (app.service.retention).
RETENTION_TABLES = ("manifests", "audit_log", "sessions", "session_events",
                    "knowledge_documents", "knowledge_chunks", "manifest_replays")
# Tokens one section holds in one turn.
TOKEN_BUCKETS = (0, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


class Metrics:
    """The service's collectors, registered in a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 classify: Classify | None = None,
                 kinds: Mapping[str, Sequence[str]] | None = None) -> None:
        """``classify`` and ``kinds``: the fault classification (``DependencyMetrics``)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.deps = DependencyMetrics(r, classify=classify, kinds=kinds)
        self.request_latency = Histogram(
            "ctxgate_request_duration_seconds", "HTTP request latency per route template.",
            ["route", "method", "status"], registry=r, buckets=REQUEST_BUCKETS)
        self.stage_latency = Histogram(
            "ctxgate_stage_duration_seconds", "Context assembly time per pipeline stage.",
            ["stage"], registry=r, buckets=STAGE_BUCKETS)
        self.candidates = Counter(
            "ctxgate_candidates", "Candidates collected, per memory layer.",
            ["layer"], registry=r)
        self.drops = Counter(
            "ctxgate_drops", "Candidates dropped, per pipeline layer that dropped them.",
            ["layer"], registry=r)
        self.segment_tokens = Histogram(
            "ctxgate_section_tokens", "Tokens placed in each envelope section per turn.",
            ["section"], registry=r, buckets=TOKEN_BUCKETS)
        # The manifest's retrieval.noise_ratio, summed: noise / retrieved over any window.
        self.retrieved_tokens = Counter(
            "ctxgate_retrieved_tokens", "Tokens of admitted segments the relevance floor "
            "judged (the manifest's retrieval.retrieved_tokens).", registry=r)
        self.noise_tokens = Counter(
            "ctxgate_noise_tokens", "Of those, tokens of segments judged weak: noise that "
            "entered the envelope (the manifest's retrieval.noise_tokens).", registry=r)
        # Any increase is an incident: an operator-planted string reached a turn it must not.
        self.leakage_canary_hits = Counter(
            "ctxgate_leakage_canary_hits", "Leakage canaries found in a turn's envelope outside "
            "their owner (kind: cross_tenant, cross_user); ids in the audit log.", ["kind"],
            registry=r)
        for kind in LEAK_KINDS:
            self.leakage_canary_hits.labels(kind=kind)
        self.prefix_turns = Counter(
            "ctxgate_stable_prefix_turns", "Turns of a session that had a turn before, by "
            "whether stable_prefix_sha256 equals that turn's: reused (a provider's prompt "
            "cache can hit) or changed.", ["prefix"], registry=r)
        for outcome in ("reused", "changed"):
            self.prefix_turns.labels(prefix=outcome)
        self.manifest_write_failures = Counter(
            "ctxgate_manifest_write_failures", "Manifests that could not be persisted.",
            registry=r)
        self.turns_shed = Counter(
            "ctxgate_turns_shed", "Turns refused with 503 overloaded: the worker had its "
            "limit of turns in flight (app.service.admission).", registry=r)
        # No tenant label: tenant ids are unbounded (a series each, forever) and name
        # customers; which tenant was refused is in the log line.
        self.quota_rejections = Counter(
            "ctxgate_quota_rejections", "Requests refused with 429 quota-exceeded, per limit "
            "(tenant_rate, key_rate, turns_concurrent).", ["limit"], registry=r)
        self.quota_unavailable = Counter(
            "ctxgate_quota_unavailable", "Quota checks that got no answer from Redis in time: "
            "the request was let through (fail-open).", registry=r)
        self.degraded_turns = Counter(
            "ctxgate_degraded_turns", "Turns answered without an optional dependency (the "
            "manifest's degraded), per dependency.", ["dependency"], registry=r)
        self.compaction_breaker_open = Counter(
            "ctxgate_compaction_breaker_open",
            "Turns served the uncompressed reference view because the compaction breaker "
            "was open.", registry=r)
        self.memory_decisions = Counter(
            "ctxgate_memory_decisions", "Memory write gate decisions, per decision and its "
            "stable type (memory.secret, memory.injection, ...).", ["decision", "type"],
            registry=r)
        self.memory_reviews = Counter(
            "ctxgate_memory_reviews", "Held memories a person approved or rejected, and "
            "stored ones a person deleted: the production check on the gate's writes.",
            ["verdict"], registry=r)
        self.context_actions = Counter(
            "ctxgate_context_actions", "Recorded context actions, per action (pruning, "
            "compaction, archive).", ["action"], registry=r)
        self.context_tokens_saved = Counter(
            "ctxgate_context_tokens_saved", "Tokens the recorded context actions took out of "
            "the session view, per action.", ["action"], registry=r)
        self.context_action_failures = Counter(
            "ctxgate_context_action_failures", "Failed context action attempts, per action "
            "and reason.", ["action", "reason"], registry=r)
        self.compaction_breaker_transitions = Counter(
            "ctxgate_compaction_breaker_transitions", "Session compaction breaker state "
            "changes (closed, open, half_open).", ["from_state", "to_state"], registry=r)
        self.compaction_views = Counter(
            "ctxgate_compaction_views_served", "Turns served a compacted session layer, per "
            "view: new (compacted for the turn), stored, extractive (the offline fallback "
            "while a model compaction is pending), reference (breaker open).", ["view"],
            registry=r)
        self.compaction_jobs = Gauge(
            "ctxgate_compaction_jobs_in_flight", "Model compactions running in the "
            "background.", registry=r, multiprocess_mode="livesum")
        self.reembedded_rows = Counter(
            "ctxgate_reembedded_rows", "Stored vectors re-embedded with the configured "
            "embedder after a switch, per table.", ["table"], registry=r)
        self.reembed_jobs = Gauge(
            "ctxgate_reembed_jobs_in_flight", "Re-embedding jobs running after an embedder "
            "switch.", registry=r, multiprocess_mode="livesum")
        self.retention_pruned = Counter(
            "ctxgate_retention_pruned_rows", "Rows the retention job deleted, per table.",
            ["table"], registry=r)
        self.retention_last_run = Gauge(
            "ctxgate_retention_last_run_timestamp_seconds", "When the last retention run "
            "ended (Unix time; 0: none yet).", registry=r, multiprocess_mode="max")
        self.retention_duration = Gauge(
            "ctxgate_retention_last_run_duration_seconds", "How long the last retention run "
            "took.", registry=r, multiprocess_mode="mostrecent")
        for limit in Limit:
            self.quota_rejections.labels(limit=limit.value)
        for table in RETENTION_TABLES:
            self.retention_pruned.labels(table=table)
        # Export every known series at zero, so rates and alerts work before the first turn.
        for action in CONTEXT_ACTIONS:
            self.context_actions.labels(action=action)
            self.context_tokens_saved.labels(action=action)
        for reason in COMPACTION_FAILURES:
            self.context_action_failures.labels(action="compaction", reason=reason)
        for view in COMPACTION_VIEWS:
            self.compaction_views.labels(view=view)
        for layer in Layer:
            self.candidates.labels(layer=layer.value)
        for drop_layer in DropLayer:
            self.drops.labels(layer=drop_layer.value)

    def observe_turn(
        self,
        *,
        candidates: Iterable[Candidate],
        assembly: Assembly,
        timings: Mapping[str, float],
        previous_prefix: str | None = None,
    ) -> None:
        """Record one assembled turn; ``timings`` are milliseconds per stage;
        ``previous_prefix``: the stable prefix of the session's turn before (None: none)."""
        for layer, n in Tally(c.layer.value for c in candidates).items():
            self.candidates.labels(layer=layer).inc(n)
        drops = (*assembly.permission_drops, *assembly.dropped)
        for drop_layer, n in Tally(d.layer.value for d in drops).items():
            self.drops.labels(layer=drop_layer).inc(n)
        tokens = dict.fromkeys((s.value for s in Section), 0)
        for seg in assembly.envelope.segments:
            tokens[seg.candidate.section.value] += seg.tokens
        for section, n in tokens.items():
            self.segment_tokens.labels(section=section).observe(n)
        for stage, ms in timings.items():
            self.stage_latency.labels(stage=stage).observe(ms / 1000)
        judged = noise(assembly.envelope.segments)
        self.retrieved_tokens.inc(judged["retrieved_tokens"])
        self.noise_tokens.inc(judged["noise_tokens"])
        if previous_prefix is not None:
            reused = previous_prefix == assembly.envelope.stable_prefix_sha256
            self.prefix_turns.labels(prefix="reused" if reused else "changed").inc()
        self.deps.refresh()

    def observe_compaction(self, outcome: CompactionOutcome) -> None:
        """Record one stored compaction run: its pruning, its compaction or archive (the
        reference view), the tokens each took out, and its attempts that failed validation."""
        if outcome.prune.pruned:
            self.context_actions.labels(action="pruning").inc()
            self.context_tokens_saved.labels(action="pruning").inc(
                max(0, outcome.tokens_before - outcome.tokens_pruned))
        action = "archive" if outcome.breaker_open else "compaction"
        self.context_actions.labels(action=action).inc()
        self.context_tokens_saved.labels(action=action).inc(
            max(0, outcome.tokens_pruned - outcome.tokens_after))
        failed = outcome.attempts - (0 if outcome.breaker_open else 1)
        if failed > 0:
            self.context_action_failures.labels(action="compaction",
                                                reason="validation").inc(failed)

    def compaction_failed(self, reason: str) -> None:
        self.context_action_failures.labels(action="compaction", reason=reason).inc()

    def breaker_moved(self, before: str, after: str) -> None:
        if before != after:
            self.compaction_breaker_transitions.labels(from_state=before,
                                                       to_state=after).inc()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of this registry, and its content type. Under
        several workers (``PROMETHEUS_MULTIPROC_DIR`` set before they start, which
        ``ctxgate serve --workers N`` does) every worker's values, summed: a scrape lands on
        one worker, and its own numbers alone would be a random fraction of the traffic."""
        self.deps.refresh()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            merged = CollectorRegistry()
            MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
            return generate_latest(merged), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def make_tracer_provider(
    service_name: str,
    *,
    console: bool,
    processors: Iterable[SpanProcessor] = (),
    sampler: Sampler | None = None,
) -> TracerProvider:
    """A provider named by ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``) when the
    environment names one, else ``service_name``; spans go to stdout when ``console``, and to
    any extra ``processors`` (an OTLP exporter, an in-memory one in tests). ``sampler``:
    the environment's (``OTEL_TRACES_SAMPLER``) when None."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource, sampler=sampler)
    if console:
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def _counts(attrs: Mapping[str, object]) -> dict[str, int]:
    """Only integer counts may become span attributes: a string could carry user content."""
    out: dict[str, int] = {}
    for key, value in attrs.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"span attribute {key!r} must be an int count, "
                            f"not {type(value).__name__}")
        out[key] = value
    return out


def record_counts(span: Span, **counts: int) -> None:
    """Add counts learnt during a stage (e.g. how many it dropped) to its span."""
    span.set_attributes(_counts(counts))


@contextlib.contextmanager
def stage_span(tracer: Tracer, name: str, **counts: int) -> Iterator[Span]:
    """A span for one pipeline stage with integer counts as attributes.

    On an exception the span is marked as an error with the exception's type name only and
    the exception propagates; its message is not recorded.
    """
    attributes = _counts(counts)
    with tracer.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.set_attribute("error.type", type(exc).__name__)
            raise
