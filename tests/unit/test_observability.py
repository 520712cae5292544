"""Metrics live in their own registry; spans carry counts only."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DropLayer, Layer, Section
from app.observability import (
    Metrics,
    make_tracer_provider,
    record_counts,
    stage_span,
)


def _samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    payload, _ = metrics.render()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(payload.decode())
        for s in family.samples
    }


def _turn() -> tuple[list[Any], Any]:
    """Duck-typed stand-ins with the attributes ``observe_turn`` reads."""
    cands = [SimpleNamespace(layer=Layer.KNOWLEDGE)] * 3 + [SimpleNamespace(layer=Layer.TURN)]
    seg = SimpleNamespace(tokens=120, candidate=SimpleNamespace(
        section=Section.DYNAMIC, relevance=0.9, weak=False))
    weak = SimpleNamespace(tokens=120, candidate=SimpleNamespace(
        section=Section.DYNAMIC, relevance=0.3, weak=True))
    assembly = SimpleNamespace(
        envelope=SimpleNamespace(segments=(seg, weak), stable_prefix_sha256="p1"),
        dropped=(SimpleNamespace(layer=DropLayer.BUDGET),),
        permission_drops=(SimpleNamespace(layer=DropLayer.PERMISSION),) * 2,
    )
    return cands, assembly


def test_render_names_every_metric_after_observations() -> None:
    m = Metrics()
    m.request_latency.labels(route="/v1/context", method="POST", status="200").observe(0.02)
    m.manifest_write_failures.inc()
    cands, assembly = _turn()
    m.observe_turn(candidates=cands, assembly=assembly, timings={"collect": 2.0, "budget": 0.5})

    payload, content_type = m.render()
    text = payload.decode()
    assert content_type.startswith("text/plain")
    for name in ("ctxgate_request_duration_seconds", "ctxgate_stage_duration_seconds",
                 "ctxgate_candidates_total", "ctxgate_drops_total", "ctxgate_section_tokens",
                 "ctxgate_manifest_write_failures_total"):
        assert f"# TYPE {name.removesuffix('_total')}" in text

    s = _samples(m)
    assert s[("ctxgate_candidates_total", frozenset({("layer", "knowledge")}))] == 3
    assert s[("ctxgate_candidates_total", frozenset({("layer", "turn")}))] == 1
    assert s[("ctxgate_drops_total", frozenset({("layer", "permission")}))] == 2
    assert s[("ctxgate_drops_total", frozenset({("layer", "budget")}))] == 1
    assert s[("ctxgate_drops_total", frozenset({("layer", "safety")}))] == 0
    assert s[("ctxgate_section_tokens_sum", frozenset({("section", "dynamic")}))] == 240
    assert s[("ctxgate_section_tokens_count", frozenset({("section", "stable")}))] == 1
    assert s[("ctxgate_stage_duration_seconds_sum", frozenset({("stage", "collect")}))] == \
        pytest.approx(0.002)
    assert s[("ctxgate_manifest_write_failures_total", frozenset())] == 1
    key = ("ctxgate_request_duration_seconds_count",
           frozenset({("route", "/v1/context"), ("method", "POST"), ("status", "200")}))
    assert s[key] == 1


def test_noise_and_stable_prefix_reuse_per_turn() -> None:
    """Noise: the weak segment's tokens of both judged ones, per turn. Prefix reuse: counted
    only for a turn with a previous one in its session (the first turn is neither)."""
    m = Metrics()
    cands, assembly = _turn()
    for previous in (None, "p1", "p0", "p1"):
        m.observe_turn(candidates=cands, assembly=assembly, timings={}, previous_prefix=previous)
    s = _samples(m)
    assert s[("ctxgate_retrieved_tokens_total", frozenset())] == 4 * 240
    assert s[("ctxgate_noise_tokens_total", frozenset())] == 4 * 120
    assert s[("ctxgate_stable_prefix_turns_total", frozenset({("prefix", "reused")}))] == 2
    assert s[("ctxgate_stable_prefix_turns_total", frozenset({("prefix", "changed")}))] == 1


def test_two_instances_do_not_collide_nor_touch_the_global_registry() -> None:
    a, b = Metrics(), Metrics()  # a shared registry would raise "Duplicated timeseries"
    a.manifest_write_failures.inc(5)
    assert _samples(a)[("ctxgate_manifest_write_failures_total", frozenset())] == 5
    assert _samples(b)[("ctxgate_manifest_write_failures_total", frozenset())] == 0
    assert REGISTRY.get_sample_value("ctxgate_manifest_write_failures_total") is None


def _memory_tracer() -> tuple[Any, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = make_tracer_provider(
        "ctxgate-test", console=False, processors=[SimpleSpanProcessor(exporter)])
    return provider.get_tracer("test"), exporter, provider


def test_stage_span_records_count_attributes() -> None:
    tracer, exporter, provider = _memory_tracer()
    with stage_span(tracer, "guards.permission", candidates=41) as span:
        record_counts(span, dropped=3)
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "guards.permission"
    assert dict(finished.attributes or {}) == {"candidates": 41, "dropped": 3}
    assert finished.resource.attributes["service.name"] == "ctxgate-test"
    provider.shutdown()


def test_stage_span_refuses_non_count_attributes() -> None:
    tracer, exporter, provider = _memory_tracer()
    secret: Any = "alice's secret question"
    with pytest.raises(TypeError, match="query"), stage_span(tracer, "collect", query=secret):
        pass
    with stage_span(tracer, "collect") as span, pytest.raises(TypeError):
        record_counts(span, ok=True)
    (finished,) = exporter.get_finished_spans()
    assert dict(finished.attributes or {}) == {}
    provider.shutdown()


def test_stage_span_marks_errors_without_the_message() -> None:
    tracer, exporter, provider = _memory_tracer()
    with pytest.raises(ValueError, match="payload"), stage_span(tracer, "budget", candidates=1):
        raise ValueError("payload text that must not be exported")
    (finished,) = exporter.get_finished_spans()
    assert finished.status.status_code is StatusCode.ERROR
    assert finished.status.description == "ValueError"
    assert finished.events == ()  # no exception event with its message
    provider.shutdown()


def test_console_provider_has_an_exporter() -> None:
    provider = make_tracer_provider("ctxgate-test", console=True)
    assert provider._active_span_processor._span_processors
    provider.shutdown()


_WORKERS_SCRIPT = """
import multiprocessing, sys

def worker(n):
    from app.observability import Metrics
    m = Metrics()
    for _ in range(n):
        m.request_latency.labels(route="/v1/context", method="POST", status="200").observe(0.01)

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(n,)) for n in (2, 3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    from app.observability import Metrics
    sys.stdout.write(Metrics().render()[0].decode())
"""


def test_with_several_workers_any_one_serves_the_sum(tmp_path: Any) -> None:
    """``ctxgate serve --workers N`` sets PROMETHEUS_MULTIPROC_DIR before the workers start;
    the multiprocess mode is chosen at import, so this runs in fresh processes."""
    import os
    import subprocess
    import sys

    script = tmp_path / "workers.py"
    script.write_text(_WORKERS_SCRIPT)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, str(script)], env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    counts = [s.value for family in text_string_to_metric_families(out)
              for s in family.samples if s.name == "ctxgate_request_duration_seconds_count"]
    assert counts == [5.0]
