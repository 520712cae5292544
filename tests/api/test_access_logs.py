"""One JSON access line per request, tied by its request id to the response header and to a
problem+json body; a caller's sane X-Request-ID is kept, anything else replaced; no body,
query string or content ever reaches the logs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.logs import RequestFields, formatter
from app.main import Container, create_app
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, turn

CANARY = "CANARY-log-83c1f2"
RUNTIME_TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """Everything logged, at DEBUG, through the server's JSON formatter and request filter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter("json"))
    handler.addFilter(RequestFields())
    # The test's own client logs each request it sends, URL and all: not the server's lines.
    handler.addFilter(lambda record: not record.name.startswith("httpx"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def _access(stream: io.StringIO) -> list[dict[str, Any]]:
    return [r for r in _records(stream) if r["logger"] == "ctxgate.access"]


async def test_every_request_has_one_access_line_with_the_id_it_was_answered_with(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        log_lines: io.StringIO) -> None:
    key = await make_key(tenant)
    before = len(_access(log_lines))  # the key's creation
    responses = [
        await client.get("/healthz"),
        await client.post("/v1/sessions/s-1/events", headers=bearer(key),
                          json={"user_id": "alice", "events": [
                              {"type": "message", "role": "user", "content": "hello"}]}),
        await client.get("/v1/manifests/no-such-turn", headers=bearer(key)),
        await client.get("/v1/no-such-route"),
    ]
    lines = _access(log_lines)[before:]
    assert len(lines) == len(responses)
    for response, line in zip(responses, lines, strict=True):
        rid = response.headers["x-request-id"]
        assert len(rid) == 32 and line["request_id"] == rid
        assert line["status"] == response.status_code
        assert line["method"] == response.request.method
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
        assert set(line) >= {"time", "level", "logger", "message", "route", "trace_id",
                             "tenant", "key_id"}
    health, append, missing, unrouted = lines
    assert health["route"] == "/healthz" and health["tenant"] is None
    # the route template, never the raw path with its ids
    assert append["route"] == "/v1/sessions/{session_id}/events"
    assert append["tenant"] == tenant and append["key_id"]
    assert "s-1" not in json.dumps(append)
    assert missing["route"] == "/v1/manifests/{turn_id}"
    assert unrouted["route"] is None and "no-such-route" not in json.dumps(unrouted)


async def test_a_problem_carries_the_request_id_of_its_header_and_log_line(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        log_lines: io.StringIO) -> None:
    key = await make_key(tenant)
    sent = "runtime-req.42:abc"
    r = await client.get("/v1/manifests/nope", headers={**bearer(key), "X-Request-ID": sent})
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/problem+json"
    assert r.headers["x-request-id"] == sent == r.json()["request_id"]
    unauthorized = await client.get("/v1/manifests/nope")
    assert unauthorized.status_code == 401
    assert unauthorized.json()["request_id"] == unauthorized.headers["x-request-id"]
    invalid = await client.post("/v1/context", headers=bearer(key), json={"query": 3})
    assert invalid.status_code == 422
    assert invalid.json()["request_id"] == invalid.headers["x-request-id"]
    lines = _access(log_lines)[-3:]
    assert [line["request_id"] for line in lines] == [
        sent, unauthorized.headers["x-request-id"], invalid.headers["x-request-id"]]
    assert [line["status"] for line in lines] == [404, 401, 422]


@pytest.mark.parametrize("header", [
    "x" * 129, "has space", "quote\"d", "<script>", "", "ünïcode", "-leading-dash"])
async def test_an_insane_request_id_is_replaced(client: httpx.AsyncClient, header: str,
                                                log_lines: io.StringIO) -> None:
    r = await client.get("/healthz", headers={b"X-Request-ID": header.encode()})
    rid = r.headers["x-request-id"]
    assert rid != header and len(rid) == 32
    assert _access(log_lines)[-1]["request_id"] == rid


async def test_the_runtime_trace_id_is_logged_even_with_tracing_off(
        client: httpx.AsyncClient, log_lines: io.StringIO) -> None:
    r = await client.get("/healthz", headers={
        "traceparent": f"00-{RUNTIME_TRACE}-00f067aa0ba902b7-01"})
    assert r.status_code == 200
    assert _access(log_lines)[-1]["trace_id"] == RUNTIME_TRACE
    await client.get("/healthz", headers={"traceparent": "00-garbage-01"})
    assert _access(log_lines)[-1]["trace_id"] is None  # malformed: ignored, no trace


async def test_no_body_query_string_or_content_reaches_the_logs(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        log_lines: io.StringIO) -> None:
    key = await make_key(tenant)
    await ingest(client, key, "doc-1", f"The runbook says {CANARY} about refunds.")
    r = await client.post(f"/v1/sessions/s-{tenant}/events", headers=bearer(key), json={
        "user_id": "alice",
        "events": [{"type": "message", "role": "user", "content": f"note {CANARY}"}]})
    assert r.status_code == 201, r.text
    r = await client.post("/v1/context", headers=bearer(key), json=turn(
        session_id=f"s-{tenant}", query=f"what about {CANARY}?"))
    assert r.status_code == 200, r.text
    await client.get(f"/v1/manifests?session_id={CANARY}", headers=bearer(key))
    await client.post("/v1/context", headers=bearer(key),
                      content=f'{{"query": "{CANARY}", '.encode())  # malformed JSON
    await client.post("/v1/context", headers=bearer(key),
                      json={"query": CANARY, "budget": CANARY})  # invalid
    await client.get(f"/v1/{CANARY}")
    text = log_lines.getvalue()
    assert len(_access(log_lines)) >= 7
    assert CANARY not in text
    assert tenant in text  # the lines are there, with the tenant id


async def test_a_500_has_its_request_id_in_the_header_the_problem_and_the_log(
        container: Container, log_lines: io.StringIO) -> None:
    app = create_app(container=container)

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.router.add_api_route("/v1/test-boom", boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        r = await c.get("/v1/test-boom", headers={"X-Request-ID": "req-500"})
    assert r.status_code == 500
    assert r.headers["x-request-id"] == "req-500" == r.json()["request_id"]
    records = _records(log_lines)
    (line,) = [x for x in records if x["logger"] == "ctxgate.access"]
    assert line["status"] == 500 and line["route"] == "/v1/test-boom"
    (error,) = [x for x in records if x["message"] == "unhandled error"]
    assert error["request_id"] == "req-500" and "RuntimeError" in error["exc_info"]
