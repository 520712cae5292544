"""The summarizer off the hot path, on the real stores with a loopback OpenAI-compatible
model: a model that hangs, refuses (HTTP 500/429, connection refused) or answers garbage,
truncated JSON or a summary without the committed constraint; the breaker opening,
half-opening after its cool-down, closing on success, and an admin resetting it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import httpx
import pytest

from app.main import Container, create_app
from app.ports import StoredCompaction
from app.settings import Settings
from tests.api.conftest import bearer
from tests.api.seed import turn
from tests.api.test_compaction import DISCOUNT, _seed, _text, _turn
from tests.local_http import JsonHandler, serve

# Wide enough for a loaded 2-core CI machine: a model that answers at once still answers within
# the deadline, a turn between two breaker steps still falls inside the cool-down, and the
# deadline stays far below the model's own timeout, so "not held for the model" is unmistakable.
DEADLINE_MS = 1000
COOLDOWN_S = 3.0
TIMEOUT_S = 6.0  # the model request's own bound (the hang outlasts it)
SID = "s-long"


class FakeModel(JsonHandler):
    """``mode`` picks the answer: ok (every constraint and pin verbatim, cited), hang,
    http500, http429, garbage (not JSON), truncated (JSON cut off), drop (a summary
    without the constraint)."""

    mode: ClassVar[str] = "ok"
    calls: ClassVar[int] = 0
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeModel.calls += 1
        mode = FakeModel.mode
        if mode == "hang":
            FakeModel.release.wait(3 * TIMEOUT_S)
            return self.send_json(200, _chat("too late"))
        if mode in ("http500", "http429"):
            return self.send_json(int(mode[4:]), {"error": {"message": "no"}})
        if mode == "garbage":
            return self.send_json(200, None)
        if mode == "truncated":
            raw = json.dumps(_chat("cut")).encode()[:25]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return None
        if mode == "drop":
            return self.send_json(200, _chat(
                f"Annex payment terms are net 30 [session://{SID}/events/5]"))
        return self.send_json(200, _chat(_verbatim(body["messages"][1]["content"])))


def _chat(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}


def _verbatim(prompt: str) -> str:
    """What a faithful model writes: each constraint and pin, word for word."""
    lines = prompt.splitlines()
    constraints = [m.group(1) for line in lines
                   if (m := re.match(r"- \[\w+\] (.*) \[[^\]]*\]$", line))]
    pins = lines[lines.index("PINNED (verbatim):") + 1:]
    pins = [p[2:] for p in pins[:next(i for i, p in enumerate(pins)
                                      if p.startswith("TRANSCRIPT"))]]
    return "\n".join(f"{text} [session://{SID}/events/1]" for text in [*constraints, *pins])


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    with serve(FakeModel) as url:
        yield url
    FakeModel.release.set()


@pytest.fixture(autouse=True)
def _model_ok() -> Iterator[None]:
    FakeModel.mode, FakeModel.calls = "ok", 0
    FakeModel.release.clear()
    yield
    FakeModel.release.set()  # a hanging request ends with the test


@pytest.fixture
def settings(pg_owner_url: str, redis_url: str, uid: str, model_url: str) -> Settings:
    return Settings(
        database_url=pg_owner_url, redis_url=redis_url, redis_prefix=f"ctxgate-test-{uid}",
        admin_token="test-admin-token-" + uid, compaction_summarizer="openai",
        openai_base_url=model_url, summarizer_timeout_s=TIMEOUT_S,
        compaction_turn_deadline_ms=DEADLINE_MS, compaction_breaker_cooldown_s=COOLDOWN_S)


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@contextlib.asynccontextmanager
async def _worker(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Container]]:
    c = await Container.open(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(container=c))
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
            yield client, c
    finally:
        await c.close()


async def _latest(c: Container, tenant: str) -> StoredCompaction:
    row = await c.compactions.latest(tenant_id=tenant, session_id=SID)
    assert row is not None
    return row


async def _settle(c: Container, tenant: str) -> None:
    """Wait for the session's background compaction, if one is running."""
    job = c.compactions.pending(tenant_id=tenant, session_id=SID)
    if job is not None:
        await job


async def _compact(client: httpx.AsyncClient, key: str) -> httpx.Response:
    return await client.post(f"/v1/sessions/{SID}/compact", headers=bearer(key), json={
        "user_id": "alice", "task_id": "t-contract", "budget_tokens": 800})


def _metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(f"{name}{{{want}}}" if want else name) + r" (\S+)"
    m = re.search(pattern, text)
    return float(m.group(1)) if m else 0.0


async def _key(client: httpx.AsyncClient, settings: Settings, tenant: str,
               role: str = "runtime") -> str:
    assert settings.admin_token is not None
    r = await client.post("/v1/admin/keys", headers=bearer(
        settings.admin_token.get_secret_value()), json={
        "tenant_id": tenant, "role": role, "max_data_level": "confidential"})
    assert r.status_code == 201, r.text
    return str(r.json()["api_key"])


async def test_a_model_that_answers_in_time_serves_its_view(
        client: httpx.AsyncClient, container: Container, settings: Settings,
        tenant: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    body = await _turn(client, key, "turn-ok")
    record = body["manifest"]["compaction"]
    assert record["type"] == "compaction.completed" and record["served"] == "new"
    assert record["pending"] is False and record["breaker"] == "closed"
    assert FakeModel.calls == 1 and DISCOUNT in _text(body)
    row = await _latest(container, tenant)
    assert row.compaction_id == record["compaction_id"] and row.ok


async def test_a_hanging_model_never_holds_the_turn(
        client: httpx.AsyncClient, container: Container, settings: Settings,
        tenant: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    warm = await client.post("/v1/context", headers=bearer(key),
                             json=turn(turn_id="turn-warm", session_id="s-warm"))
    assert warm.status_code == 200, warm.text  # the embedder is loaded before the clock runs
    FakeModel.mode = "hang"
    t0 = time.perf_counter()
    body = await _turn(client, key, "turn-h1")
    elapsed = time.perf_counter() - t0
    man = body["manifest"]
    record = man["compaction"]
    # served the offline extractive view (nothing stored yet), the model still pending
    assert record["served"] == "extractive" and record["pending"] is True, record
    assert record["stored"] is False and record["validation"]["ok"] is True
    assert DISCOUNT in _text(body)
    # the deadline, then the extractive run (~30 ms quiet, ~0.5 s on a loaded machine)
    assert man["timings_ms"]["compaction"] < DEADLINE_MS + 1500, man["timings_ms"]
    assert elapsed < TIMEOUT_S  # the model's own timeout was never waited for
    assert await container.compactions.latest(tenant_id=tenant, session_id=SID) is None
    # the background job times out: a failure row (no view), counted toward the breaker
    await _settle(container, tenant)
    row = await _latest(container, tenant)
    assert row.record["type"] == "compaction.failed" and row.record["reason"] == "timeout"
    assert row.consecutive_failures == 1 and not row.breaker_open and row.view is None
    metrics = (await client.get("/metrics")).text
    assert _metric(metrics, "ctxgate_context_action_failures_total", action="compaction",
                   reason="timeout") == 1
    assert _metric(metrics, "ctxgate_compaction_views_served_total", view="extractive") == 1
    assert _metric(metrics, "ctxgate_compaction_views_served_total", view="new") == 0
    # the model recovers: the next turn's job stores its view; a later turn serves it
    FakeModel.mode = "ok"
    nxt = (await _turn(client, key, "turn-h2"))["manifest"]["compaction"]
    await _settle(container, tenant)
    row = await _latest(container, tenant)
    assert row.record["type"] == "compaction.completed" and row.consecutive_failures == 0
    if nxt["served"] != "new":  # the job outlived this turn's deadline
        nxt = (await _turn(client, key, "turn-h3"))["manifest"]["compaction"]
        assert nxt["served"] == "stored"
    assert nxt["compaction_id"] == row.compaction_id and nxt["pending"] is False


async def test_the_last_stored_view_is_served_while_a_model_run_is_pending(
        client: httpx.AsyncClient, container: Container, settings: Settings,
        tenant: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    first = (await _turn(client, key, "turn-p1"))["manifest"]["compaction"]
    await _settle(container, tenant)  # a model slower than the deadline still stores its view
    stored = await _latest(container, tenant)
    assert stored.record["type"] == "compaction.completed" and stored.view is not None
    assert first["served"] in ("new", "extractive")
    r = await client.post(f"/v1/sessions/{SID}/events", headers=bearer(key), json={
        "user_id": "alice", "events": [
            {"type": "message", "role": "user", "content": f"Annex note {i}: " + "net 30 " * 40}
            for i in range(12)]})
    assert r.status_code == 201, r.text
    FakeModel.mode = "hang"
    t0 = time.perf_counter()
    body = await _turn(client, key, "turn-p2")
    assert time.perf_counter() - t0 < TIMEOUT_S
    record = body["manifest"]["compaction"]
    assert record["served"] == "stored" and record["pending"] is True, record
    assert record["compaction_id"] == stored.compaction_id
    assert DISCOUNT in _text(body)
    await _settle(container, tenant)
    row = await _latest(container, tenant)  # the failure carries the last valid view
    assert row.record["type"] == "compaction.failed" and row.view is not None
    assert row.view["compaction_id"] == stored.compaction_id


@pytest.mark.parametrize(("mode", "reason"), [
    ("http500", "http_status"), ("http429", "http_status"), ("garbage", "bad_response"),
    ("truncated", "bad_response")])
async def test_a_refusing_or_garbled_model_is_a_503_and_stores_no_view(
        client: httpx.AsyncClient, container: Container, settings: Settings, tenant: str,
        mode: str, reason: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    FakeModel.mode = mode
    r = await _compact(client, key)
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["type"] == "dependency-unavailable" and problem["dependency"] == "summarizer"
    assert problem["reason"] == reason and int(r.headers["Retry-After"]) >= 1
    row = await _latest(container, tenant)
    assert row.record["type"] == "compaction.failed" and row.view is None and not row.ok
    assert row.consecutive_failures == 1
    # a turn is served the extractive view; its job fails fast, again counted
    body = await _turn(client, key, f"turn-{mode}")
    record = body["manifest"]["compaction"]
    assert record["served"] == "extractive" and DISCOUNT in _text(body)
    await _settle(container, tenant)
    assert (await _latest(container, tenant)).consecutive_failures == 2


async def test_connection_refused_counts_and_is_a_503(settings: Settings, tenant: str) -> None:
    async with _worker(settings.model_copy(update={"openai_base_url": _dead_url()})) as (
            client, c):
        key = await _key(client, settings, tenant)
        await _seed(client, key, SID)
        r = await _compact(client, key)
        assert r.status_code == 503 and r.json()["reason"] == "unreachable", r.text
        assert "Retry-After" in r.headers
        row = await _latest(c, tenant)
        assert row.record["type"] == "compaction.failed" and row.consecutive_failures == 1


async def test_a_summary_missing_the_constraint_is_not_stored(
        client: httpx.AsyncClient, container: Container, settings: Settings,
        tenant: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    FakeModel.mode = "drop"
    r = await _compact(client, key)
    assert r.status_code == 200, r.text
    rec = r.json()
    # three attempts failed validation (the retry pinned the clause; the model dropped it
    # again): the breaker opened and the reference view is stored, not the summary
    assert rec["type"] == "compaction.breaker_open" and rec["attempts"] == 3
    assert rec["validation"]["ok"] is False and rec["consecutive_failures"] == 3
    failed = {c["type"] for c in rec["validation"]["checks"] if not c["ok"]}
    assert "compaction.summary_constraints_verbatim" in failed
    row = await _latest(container, tenant)
    assert row.breaker_open and row.view is not None and row.view["reference"] is True
    assert "Annex payment terms are net 30" not in row.view["block"]
    metrics = (await client.get("/metrics")).text
    assert _metric(metrics, "ctxgate_context_action_failures_total", action="compaction",
                   reason="validation") == 3
    assert _metric(metrics, "ctxgate_context_actions_total", action="archive") == 1
    assert _metric(metrics, "ctxgate_compaction_breaker_transitions_total",
                   from_state="closed", to_state="open") == 1


async def test_the_breaker_opens_half_opens_after_the_cooldown_and_closes_on_success(
        client: httpx.AsyncClient, container: Container, settings: Settings,
        tenant: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    FakeModel.mode = "http500"
    for _ in range(3):
        r = await _compact(client, key)
        assert r.status_code == 503, r.text
    assert FakeModel.calls == 3
    assert 1 <= int(r.headers["Retry-After"]) <= COOLDOWN_S + 1  # the rest of the cool-down
    row = await _latest(container, tenant)
    assert row.breaker_open and row.consecutive_failures == 3
    assert row.record["breaker"] == "open" and row.record["reason"] == "http_status"
    # open: no model call; the reference view, for a compact and for a turn alike
    r = await _compact(client, key)
    assert r.status_code == 200 and r.json()["type"] == "compaction.breaker_open", r.text
    body = await _turn(client, key, "turn-open")
    assert body["manifest"]["compaction"]["breaker_open"] is True
    assert DISCOUNT in _text(body) and FakeModel.calls == 3
    # half-open after the cool-down: one probe; it succeeds, the breaker closes
    await asyncio.sleep(COOLDOWN_S)
    FakeModel.mode = "ok"
    r = await _compact(client, key)
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["type"] == "compaction.completed" and rec["breaker"] == "closed"
    assert rec["consecutive_failures"] == 0 and FakeModel.calls == 4
    metrics = (await client.get("/metrics")).text
    for before, after in (("closed", "open"), ("half_open", "closed")):
        assert _metric(metrics, "ctxgate_compaction_breaker_transitions_total",
                       from_state=before, to_state=after) == 1


async def test_a_failed_probe_reopens_the_breaker(
        client: httpx.AsyncClient, container: Container, settings: Settings,
        tenant: str) -> None:
    key = await _key(client, settings, tenant)
    await _seed(client, key, SID)
    FakeModel.mode = "http429"
    for _ in range(3):
        assert (await _compact(client, key)).status_code == 503
    opened = (await _latest(container, tenant)).record["breaker_opened_at"]
    await asyncio.sleep(COOLDOWN_S)
    r = await _compact(client, key)  # the probe
    assert r.status_code == 503 and FakeModel.calls == 4
    row = await _latest(container, tenant)
    assert row.breaker_open and row.record["breaker"] == "open"
    assert row.record["breaker_opened_at"] > opened  # the cool-down starts again


async def test_an_admin_resets_the_breaker(
        client: httpx.AsyncClient, container: Container, settings: Settings, tenant: str,
        other_tenant: str) -> None:
    key = await _key(client, settings, tenant)
    admin = await _key(client, settings, tenant, role="admin")
    stranger = await _key(client, settings, other_tenant, role="admin")
    await _seed(client, key, SID)
    FakeModel.mode = "http500"
    for _ in range(3):
        assert (await _compact(client, key)).status_code == 503
    url = f"/v1/sessions/{SID}/compaction/reset"
    r = await client.post(url, headers=bearer(key))
    assert r.status_code == 403 and r.json()["type"] == "forbidden-scope", r.text
    for headers, path in ((bearer(stranger), url),
                          (bearer(admin), "/v1/sessions/nope/compaction/reset")):
        r = await client.post(path, headers=headers)
        assert r.status_code == 404 and r.json()["type"] == "not-found", r.text
    r = await client.post(url, headers=bearer(admin))
    assert r.status_code == 200, r.text
    assert r.json() == {"session_id": SID, "state": "closed", "previous_state": "open",
                        "previous_failures": 3, "reset": True}
    row = await _latest(container, tenant)
    assert row.record["type"] == "compaction.reset" and row.consecutive_failures == 0
    assert row.view is None  # the reference view is not served after a reset
    again = await client.post(url, headers=bearer(admin))
    assert again.status_code == 200 and again.json()["reset"] is False
    # closed: the next compaction calls the model again
    FakeModel.mode = "ok"
    r = await _compact(client, key)
    assert r.status_code == 200 and r.json()["type"] == "compaction.completed", r.text
    assert FakeModel.calls == 4
    assert r.json()["previous_compaction_id"] == row.compaction_id


async def test_close_cancels_a_pending_compaction(settings: Settings, tenant: str) -> None:
    async with _worker(settings) as (client, c):
        key = await _key(client, settings, tenant)
        await _seed(client, key, SID)
        FakeModel.mode = "hang"
        body = await _turn(client, key, "turn-c")
        assert body["manifest"]["compaction"]["pending"] is True
        job = c.compactions.pending(tenant_id=tenant, session_id=SID)
        assert job is not None
    assert job.cancelled()
