"""A turn's trace reaches an OTLP/HTTP receiver under the runtime's trace id, with the turn,
collect, pipeline and persist spans, the store client spans beneath them, and no content."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.main import Container, create_app
from app.settings import Settings
from tests.api.conftest import bearer
from tests.api.seed import ingest, turn
from tests.otlp_receiver import ReceivedSpan, Receiver, otlp_receiver

CANARY = "CANARY-trace-4b1d9e"
RUNTIME_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
RUNTIME_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{RUNTIME_TRACE}-{RUNTIME_SPAN}-01"
SERVER, CLIENT = 2, 3  # OTLP SpanKind


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with otlp_receiver() as r:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "ctxgate-trace-test")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # one export, at shutdown
        for name in ("OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER"):
            monkeypatch.delenv(name, raising=False)
        yield r


async def _traced_requests(settings: Settings, tenant: str
                           ) -> tuple[httpx.Response, httpx.Response]:
    """A key, a document, a session append and two turns (one with a runtime traceparent,
    one with a malformed one), each carrying the canary; the container is closed (spans
    flushed) before returning."""
    container = await Container.open(settings)
    try:
        assert container.tracing.provider is not None
        app = create_app(container=container)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://test") as c:
            admin = {"Authorization": f"Bearer {settings.admin_token.get_secret_value()}"}  # type: ignore[union-attr]
            made = await c.post("/v1/admin/keys", headers=admin, json={
                "tenant_id": tenant, "role": "runtime",
                "max_data_level": "confidential"})
            key = str(made.json()["api_key"])
            await ingest(c, key, "runbook", f"Refund calls time out: {CANARY} secret runbook.")
            appended = await c.post("/v1/sessions/s1/events", headers=bearer(key), json={
                "user_id": "alice", "events": [{"type": "message", "role": "user",
                                                "content": f"my note {CANARY}"}]})
            assert appended.status_code == 201, appended.text
            joined = await c.post(
                "/v1/context", json=turn(turn_id="traced", session_id="s1",
                                         query=f"why does the refund time out {CANARY}?"),
                headers={**bearer(key), "traceparent": TRACEPARENT,
                         "tracestate": "vendor=opaque"})
            malformed = await c.post(
                "/v1/context", json=turn(turn_id="untraced", query=f"again {CANARY}"),
                headers={**bearer(key), "traceparent": f"00-{CANARY}-zz-01"})
            assert (await c.get("/readyz")).status_code == 200  # a probe: not traced
        return joined, malformed
    finally:
        await container.close()


async def test_a_turn_joins_the_runtime_trace_with_store_spans_and_no_content(
        settings: Settings, tenant: str, receiver: Receiver) -> None:
    joined, malformed = await _traced_requests(settings, tenant)
    assert joined.status_code == 200, joined.text
    assert malformed.status_code == 200, malformed.text  # a bad traceparent is ignored
    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans
    assert {s.service for s in spans} == {"ctxgate-trace-test"}

    turn_trace = [s for s in spans if s.trace_id == RUNTIME_TRACE]
    by_name = {s.name: s for s in turn_trace}
    server = by_name["POST /v1/context"]
    assert server.kind == SERVER and server.parent_span_id == RUNTIME_SPAN
    assert server.attributes["http.route"] == "/v1/context"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["ctxgate.request_id"] == joined.headers["x-request-id"]
    expected = {"ctxgate.turn", "ctxgate.collect", "ctxgate.collect.session",
                "ctxgate.collect.knowledge.vector", "ctxgate.collect.knowledge.text",
                "ctxgate.collect.embedding", "ctxgate.pipeline",
                "ctxgate.pipeline.permission", "ctxgate.pipeline.safety",
                "ctxgate.pipeline.relevance", "ctxgate.pipeline.budget", "ctxgate.persist"}
    assert expected <= set(by_name), sorted(by_name)
    assert _parent(turn_trace, "ctxgate.collect.session").name == "ctxgate.collect"
    assert _parent(turn_trace, "ctxgate.pipeline.budget").name == "ctxgate.pipeline"
    assert _parent(turn_trace, "ctxgate.turn") == server
    assert by_name["ctxgate.turn"].attributes["ctxgate.turn_id"] == "traced"  # → its manifest

    def system(s: ReceivedSpan) -> object:
        return s.attributes.get("db.system", s.attributes.get("db.system.name"))

    pg = [s for s in turn_trace if system(s) == "postgresql"]
    redis = [s for s in turn_trace if system(s) == "redis"]
    assert pg and redis
    assert all(s.kind == CLIENT for s in pg + redis)
    # the knowledge reads are children of their layer's span, inside the turn
    assert any(_ancestors(turn_trace, s) >= {"ctxgate.collect.knowledge.vector"} for s in pg)
    assert any(_ancestors(turn_trace, s) >= {"ctxgate.persist"} for s in pg)

    # A malformed traceparent starts a trace of its own, rooted at the request.
    other = [s for s in spans if s.name == "POST /v1/context" and s.trace_id != RUNTIME_TRACE]
    assert len(other) == 1 and other[0].parent_span_id == ""
    # The append's request is traced too, with no runtime parent.
    assert any(s.name == "POST /v1/sessions/{session_id}/events" for s in spans)

    # Nothing the caller sent as content is in any attribute; no statement parameters.
    for s in spans:
        assert "db.statement.parameters" not in s.attributes, s
        for value in s.attributes.values():
            assert CANARY not in str(value), (s.name, s.attributes)
    # A probe, and a background poll's store calls, start no trace of their own.
    assert not [s for s in spans if s.name.endswith("/readyz")]
    assert not [s for s in spans if s.kind == CLIENT and s.parent_span_id == ""]


def _parent(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    (child,) = [s for s in spans if s.name == name]
    (parent,) = [s for s in spans if s.span_id == child.parent_span_id]
    return parent


def _ancestors(spans: list[ReceivedSpan], span: ReceivedSpan) -> set[str]:
    ids = {s.span_id: s for s in spans}
    out: set[str] = set()
    while span.parent_span_id in ids:
        span = ids[span.parent_span_id]
        out.add(span.name)
    return out
