"""Where a process's spans go, the runtime's trace context, and the client instrumentations.

Configured by the standard OpenTelemetry environment variables, and off unless configured
(the SDK alone would export OTLP to localhost:4318 by default):

- ``OTEL_SDK_DISABLED=true``: off, whatever else is set.
- ``OTEL_TRACES_EXPORTER``: a comma list of ``otlp``, ``console`` and ``none``. Unset, it is
  ``otlp`` when an endpoint is set (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_ENDPOINT``), else nothing. ``CTXGATE_OTEL_CONSOLE`` adds ``console``.
- OTLP is sent as protobuf over HTTP (``OTEL_EXPORTER_OTLP_*_PROTOCOL`` other than
  ``http/protobuf`` is refused at start-up: no gRPC exporter is installed); the exporter reads
  its endpoint, headers, timeout and compression, and the batch processor its ``OTEL_BSP_*``,
  from the environment themselves. ``OTEL_TRACES_SAMPLER`` chooses the sampler.
- ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the resource (default
  ``ctxgate``).

Off, the tracer is the no-op one and nothing is instrumented: SDK spans that no processor
reads cost ~0.7 ms of CPU per turn (5 % of it, py-spy). On, asyncpg, Redis and outgoing httpx
calls get client spans from the standard instrumentations — asyncpg's never with statement
parameters, Redis's commands with their arguments replaced by ``?``. The global tracer
provider is never set: the instrumentations are handed this one.

The runtime's W3C ``traceparent``/``tracestate`` make a request's span a child of the agent's
span (``incoming_context``); a malformed header is ignored, so the request starts a trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    Decision,
    Sampler,
    SamplingResult,
    _get_from_env_or_default,
)
from opentelemetry.trace import Link, SpanKind, Tracer, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from app.observability import TRACER_NAME, make_tracer_provider

EXPORTERS = ("otlp", "console", "none")
OTLP_PROTOCOL = "http/protobuf"
_W3C = TraceContextTextMapPropagator()


def exporter_names(environ: Mapping[str, str], *, console: bool) -> set[str]:
    """The exporters the environment asks for (``otlp``, ``console``); empty: tracing off.
    An unknown exporter or OTLP protocol is a ValueError (a typo must not silently drop
    every trace)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return set()
    listed = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if listed:
        names = {n.strip() for n in listed.split(",") if n.strip()}
    elif environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or \
            environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        names = {"otlp"}
    else:
        names = set()
    unknown = names - set(EXPORTERS)
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER: unsupported exporter(s) {sorted(unknown)}; "
                         f"this build has {list(EXPORTERS)}")
    if "otlp" in names:
        protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or OTLP_PROTOCOL)
        if protocol.strip().lower() != OTLP_PROTOCOL:
            raise ValueError(f"OTLP protocol {protocol!r} is not supported; "
                             f"use {OTLP_PROTOCOL}")
    if console:
        names.add("console")
    return names - {"none"}


class NoOrphanClients(Sampler):
    """Drops a client span that has no parent — a background worker's poll query, which
    would otherwise start a trace of its own every half second — and leaves every other
    decision to ``base`` (the environment's sampler)."""

    def __init__(self, base: Sampler) -> None:
        self._base = base

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[Link] | None = None,
                      trace_state: TraceState | None = None) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if kind is SpanKind.CLIENT and not parent.is_valid:
            return SamplingResult(Decision.DROP)
        return self._base.should_sample(parent_context, trace_id, name, kind, attributes,
                                        links, trace_state)

    def get_description(self) -> str:
        return f"NoOrphanClients{{{self._base.get_description()}}}"


def _instrumentors() -> tuple[BaseInstrumentor, ...]:
    # A singleton each; asyncpg's is told again that parameters (content) are never captured.
    return (AsyncPGInstrumentor(capture_parameters=False),  # type: ignore[no-untyped-call]
            RedisInstrumentor(),
            HTTPXClientInstrumentor())


@dataclass(kw_only=True)
class Tracing:
    """A process's tracer; with ``provider`` (tracing on), what ``instrument`` patched is
    undone and the batched spans flushed by ``shutdown``."""

    tracer: Tracer
    provider: TracerProvider | None = None
    _patched: list[BaseInstrumentor] = field(default_factory=list)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, console: bool,
                 service_name: str = TRACER_NAME) -> Tracing:
        names = exporter_names(environ, console=console)
        if not names:
            return cls(tracer=trace.NoOpTracer())
        processors = [BatchSpanProcessor(OTLPSpanExporter())] if "otlp" in names else []
        provider = make_tracer_provider(service_name, console="console" in names,
                                        processors=processors,
                                        sampler=NoOrphanClients(_get_from_env_or_default()))
        return cls(tracer=provider.get_tracer(TRACER_NAME), provider=provider)

    def instrument(self) -> None:
        """Patch the asyncpg, Redis and httpx clients (process-wide) to trace into this
        provider. An instrumentation another ``Tracing`` already holds is left to it."""
        if self.provider is None:
            return
        for instrumentor in _instrumentors():
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument(tracer_provider=self.provider)
                self._patched.append(instrumentor)

    def shutdown(self) -> None:
        while self._patched:
            self._patched.pop().uninstrument()
        if self.provider is not None:
            self.provider.shutdown()


def stage_spans(tracer: Tracer, start_ns: int, timings_ms: Mapping[str, float]) -> None:
    """The pure pipeline's stages (``app.core.pipeline``, timed by its clock, not traced: the
    core does no I/O) as child spans of the current span, laid end to end from
    ``start_ns`` in their order; a stage the budget loop ran again holds all its attempts."""
    at = start_ns
    for stage, ms in timings_ms.items():
        end = at + int(ms * 1_000_000)
        tracer.start_span(f"ctxgate.pipeline.{stage}", start_time=at).end(end_time=end)
        at = end


def incoming_context(headers: Mapping[str, str]) -> Context:
    """The current context with the W3C ``traceparent``/``tracestate`` of ``headers`` as the
    parent span; without a valid ``traceparent``, the current context unchanged (a new trace,
    or the enclosing request's for an in-process call)."""
    return _W3C.extract(headers, context=otel_context.get_current())
