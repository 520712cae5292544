"""Where spans go (the OTEL_* variables, off unless set), the runtime's trace context, the
sampler that keeps background polls out, the pipeline's stage spans and the log helpers."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind

from app.logs import (
    RequestFields,
    RequestInfo,
    bind_request,
    formatter,
    logging_config,
    request_id_from,
    unbind_request,
)
from app.observability import make_tracer_provider
from app.tracing import (
    NoOrphanClients,
    Tracing,
    exporter_names,
    incoming_context,
    stage_spans,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(("environ", "console", "names"), [
    ({}, False, set()),  # off unless configured (the SDK alone would default to otlp)
    ({}, True, {"console"}),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False, {"otlp"}),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, False, {"otlp"}),
    ({"OTEL_TRACES_EXPORTER": "otlp,console"}, False, {"otlp", "console"}),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, False,
     set()),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, True, set()),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, False,
     {"otlp"}),
])
def test_exporters_follow_the_standard_variables(environ: dict[str, str], console: bool,
                                                 names: set[str]) -> None:
    assert exporter_names(environ, console=console) == names


@pytest.mark.parametrize("environ", [
    {"OTEL_TRACES_EXPORTER": "zipkin"},
    {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
])
def test_an_unsupported_exporter_refuses_to_start(environ: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"not supported|unsupported"):
        exporter_names(environ, console=False)


def test_tracing_off_is_the_no_op_tracer_and_leaves_the_global_provider() -> None:
    before = trace.get_tracer_provider()
    off = Tracing.from_env({}, console=False)
    assert off.provider is None
    with off.tracer.start_as_current_span("x") as span:
        assert not span.is_recording()  # nowhere to go: no cost
    off.instrument()  # nothing patched
    off.shutdown()
    on = Tracing.from_env({"OTEL_TRACES_EXPORTER": "console"}, console=False)
    assert on.provider is not None
    on.shutdown()
    assert trace.get_tracer_provider() is before


def test_the_service_name_comes_from_the_environment_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    assert make_tracer_provider("ctxgate", console=False).resource.attributes[
        "service.name"] == "ctxgate"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ctxgate-eu-1")
    assert make_tracer_provider("ctxgate", console=False).resource.attributes[
        "service.name"] == "ctxgate-eu-1"


def _memory() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = make_tracer_provider("t", console=False, sampler=NoOrphanClients(ALWAYS_ON),
                                    processors=[SimpleSpanProcessor(exporter)])
    return provider, exporter


def test_a_client_span_without_a_parent_is_not_sampled() -> None:
    provider, exporter = _memory()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT):
        pass  # a background worker's poll
    with tracer.start_as_current_span("POST /v1/context", kind=SpanKind.SERVER), \
            tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT):
        pass
    with tracer.start_as_current_span("ctxgate.retention"):
        pass  # an internal root span is kept
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "POST /v1/context", "SELECT", "ctxgate.retention"]
    provider.shutdown()


@pytest.mark.parametrize(("header", "joined"), [
    (f"00-{TRACE}-00f067aa0ba902b7-01", True),
    (f"00-{TRACE}-00f067aa0ba902b7", False),  # no flags
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),  # zero trace id
    (f"ff-{TRACE}-00f067aa0ba902b7-01", False),  # the forbidden version
    ("00-garbage-01", False),
    ("x" * 4096, False),
    ("", False),
])
def test_the_runtime_traceparent_is_joined_or_ignored(header: str, joined: bool) -> None:
    parent = trace.get_current_span(incoming_context(
        {"traceparent": header, "tracestate": "vendor=opaque"})).get_span_context()
    assert parent.is_valid is joined
    if joined:
        assert format(parent.trace_id, "032x") == TRACE and parent.is_remote
        assert parent.trace_state.get("vendor") == "opaque"


def test_pipeline_stages_are_child_spans_laid_end_to_end() -> None:
    provider, exporter = _memory()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("ctxgate.pipeline") as parent:
        stage_spans(tracer, 1_000_000_000, {"permission": 1.5, "safety": 0.0, "budget": 2.0})
    spans = {s.name: s for s in exporter.get_finished_spans()}
    permission, safety, budget = (spans[f"ctxgate.pipeline.{n}"]
                                  for n in ("permission", "safety", "budget"))
    assert (permission.start_time, permission.end_time) == (1_000_000_000, 1_001_500_000)
    assert safety.start_time == safety.end_time == permission.end_time
    assert (budget.start_time, budget.end_time) == (1_001_500_000, 1_003_500_000)
    for span in (permission, safety, budget):
        assert span.parent is not None
        assert span.parent.span_id == parent.get_span_context().span_id
        assert not span.attributes
    provider.shutdown()


@pytest.mark.parametrize(("header", "kept"), [
    ("7d3c1f0e-5a2b-4c1d-9e8f-0a1b2c3d4e5f", True), ("runtime-req.42:abc", True),
    ("a" * 128, True), ("a" * 129, False), ("has space", False), ("<b>", False),
    ("", False), (None, False), ("-x", False), ("line\nbreak", False),
])
def test_a_request_id_is_kept_only_when_sane(header: str | None, kept: bool) -> None:
    got = request_id_from(header)
    assert (got == header) is kept
    if not kept:
        assert len(got) == 32 and int(got, 16) >= 0


def _emit(fmt: Any, **extra: Any) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(RequestFields())
    log = logging.getLogger("ctxgate.test-logs")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        log.info("hello %s", "world", extra=extra)
    finally:
        log.removeHandler(handler)
    return stream.getvalue()


def test_every_line_carries_the_request_and_trace_ids() -> None:
    outside = json.loads(_emit("json"))
    assert outside["request_id"] is None and outside["trace_id"] is None
    assert outside["message"] == "hello world" and outside["level"] == "INFO"
    assert outside["logger"] == "ctxgate.test-logs" and outside["time"]
    token = bind_request(RequestInfo(request_id="r-1", trace_id=TRACE))
    try:
        inside = json.loads(_emit("json", status=200))
        text = _emit("text")
    finally:
        unbind_request(token)
    assert inside["request_id"] == "r-1" and inside["trace_id"] == TRACE
    assert inside["status"] == 200
    assert "[r-1] hello world" in text


def test_the_server_logging_config_applies() -> None:
    config = logging_config("warning", "json")
    assert config["loggers"]["uvicorn.access"]["propagate"] is False
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    named = {name: (logging.getLogger(name).level, logging.getLogger(name).propagate,
                    logging.getLogger(name).handlers[:]) for name in config["loggers"]}
    try:
        logging.config.dictConfig(config)
        (handler,) = root.handlers
        assert root.level == logging.WARNING
        assert any(isinstance(f, RequestFields) for f in handler.filters)
    finally:
        for h in root.handlers[:]:
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        for name, (was, propagate, kept) in named.items():
            logger = logging.getLogger(name)
            logger.setLevel(was)
            logger.propagate = propagate
            logger.handlers[:] = kept
