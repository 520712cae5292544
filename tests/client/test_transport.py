"""Retries, timeouts, headers and path escaping, against a scripted loopback server; the
injected transport against the in-process app. Sync and async alike."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, cast
from urllib.parse import quote

import httpx
import pytest
from ctxgate_client import (
    AsyncCtxgateClient,
    CtxgateClient,
    CtxgateConnectionError,
    CtxgateError,
    Message,
    RateLimitedError,
    RetryPolicy,
    ServerError,
    UnavailableError,
)
from ctxgate_client.errors import retry_after_seconds

from app.main import Container, create_app
from tests.client.conftest import SyncAsAsync
from tests.local_http import JsonHandler, serve

OK = {"status": "ok"}


@dataclass
class Script:
    """What the loopback server answers, in order (the last answer repeats), and what it saw."""

    answers: list[tuple[int, dict[str, str], Any]] = field(default_factory=list)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    delay: float = 0.0

    def handler(self) -> type[JsonHandler]:
        script = self

        class Handler(JsonHandler):
            def answer(self) -> None:
                script.seen.append((self.command, self.path, dict(self.headers.items())))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                time.sleep(script.delay)
                status, headers, doc = (script.answers.pop(0) if len(script.answers) > 1
                                        else script.answers[0])
                raw = (b"" if status == 204 else b"<html>bad gateway" if doc is None
                       else httpx.Response(200, json=doc).content)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/problem+json"
                                     if status >= 400 else "application/json")
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = answer

        return Handler


def unavailable(retry_after: str | None) -> tuple[int, dict[str, str], Any]:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return 503, headers, {"type": "store-busy", "title": "Store busy", "status": 503,
                          "detail": "no database connection became free in time; retry"}


Make = Callable[..., AsyncCtxgateClient]


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def base_url(script: Script) -> Iterator[str]:
    with serve(script.handler()) as url:
        yield url.removesuffix("/v1")


@pytest.fixture(params=["sync", "async"])
async def make(request: pytest.FixtureRequest, base_url: str) -> AsyncIterator[Make]:
    opened: list[CtxgateClient | AsyncCtxgateClient] = []

    def build(**options: Any) -> AsyncCtxgateClient:
        options.setdefault("base_url", base_url)
        options.setdefault("api_key", "k-123")
        if request.param == "sync":
            sync = CtxgateClient(**options)
            opened.append(sync)
            return cast(AsyncCtxgateClient, SyncAsAsync(sync))
        client = AsyncCtxgateClient(**options)
        opened.append(client)
        return client

    yield build
    for c in opened:
        if isinstance(c, CtxgateClient):
            c.close()
        else:
            await c.aclose()


async def test_a_503_is_retried_after_its_retry_after(make: Make, script: Script) -> None:
    script.answers = [unavailable("1"), (200, {}, OK)]
    start = time.monotonic()
    assert (await make().healthz()).status == "ok"
    assert time.monotonic() - start >= 1.0
    assert len(script.seen) == 2


async def test_a_429_of_a_turn_with_its_own_turn_id_is_retried(make: Make,
                                                               script: Script) -> None:
    turn = {"turn_id": "t1", "envelope": {"segments": [], "messages": [], "total_tokens": 0,
                                          "stable_prefix_sha256": "x"},
            "manifest": {"turn_id": "t1", "tenant_id": "t", "user_id": "u",
                         "created_at": "now"}, "appended": {"seqs": [7]}}
    script.answers = [(429, {"Retry-After": "0"}, {"type": "rate-limited", "title": "Slow",
                                                   "status": 429, "detail": "slow down"}),
                      (200, {}, turn)]
    out = await make().assemble_context(user_id="u", query="q", budget=1000, turn_id="t1",
                                        append_events=[Message(role="user", content="hi")])
    assert out.appended is not None and out.appended.seqs == [7]
    assert len(script.seen) == 2


async def test_requests_without_an_idempotency_handle_are_sent_once(make: Make,
                                                                   script: Script) -> None:
    script.answers = [unavailable("0"), (200, {}, OK)]
    ctx = make()
    with pytest.raises(UnavailableError) as once:
        await ctx.append_events("s", user_id="u", events=[Message(role="user", content="x")])
    assert (once.value.status, once.value.type, once.value.retry_after) == (
        503, "store-busy", 0.0)
    script.answers = [(429, {}, {"type": "rate-limited", "title": "Slow", "status": 429,
                                 "detail": "slow down"})]
    with pytest.raises(RateLimitedError):  # a turn the server names cannot be retried
        await ctx.assemble_context(user_id="u", query="q", budget=1000)
    assert [m for m, _, _ in script.seen] == ["POST", "POST"]


async def test_retries_are_bounded_in_attempts_and_total_wait(make: Make,
                                                              script: Script) -> None:
    script.answers = [unavailable(None)]  # no Retry-After: backoff
    with pytest.raises(UnavailableError):
        await make(retry=RetryPolicy(max_attempts=3, backoff=0.01)).healthz()
    assert len(script.seen) == 3
    script.seen.clear()
    script.answers = [unavailable("120")]  # longer than the policy's max_wait
    start = time.monotonic()
    with pytest.raises(UnavailableError) as late:
        await make(retry=RetryPolicy(max_wait=5)).healthz()
    assert time.monotonic() - start < 2 and late.value.retry_after == 120.0
    assert len(script.seen) == 1
    script.seen.clear()
    script.answers = [unavailable("0")]
    with pytest.raises(UnavailableError):
        await make(retry=RetryPolicy(max_attempts=1)).healthz()
    assert len(script.seen) == 1


def test_retry_after_as_an_http_date() -> None:
    soon = format_datetime(datetime.now(UTC), usegmt=True)
    response = httpx.Response(503, headers={"Retry-After": soon})
    wait = retry_after_seconds(response)
    assert wait is not None and 0 <= wait <= 1
    assert retry_after_seconds(httpx.Response(503, headers={"Retry-After": "soon"})) is None


async def test_a_non_problem_answer_still_gets_its_class(make: Make, script: Script) -> None:
    script.answers = [(502, {}, None)]
    with pytest.raises(ServerError) as bad:
        await make().healthz()
    assert (bad.value.status, bad.value.type) == (502, "http-502")
    assert "bad gateway" in bad.value.detail


async def test_no_answer_is_a_connection_error(make: Make, script: Script) -> None:
    script.answers, script.delay = [(200, {}, OK)], 1.0
    with pytest.raises(CtxgateConnectionError) as slow:
        await make(timeout=0.2).healthz()
    assert (slow.value.status, slow.value.type) == (0, "timeout")
    with pytest.raises(CtxgateConnectionError) as refused:
        await make(base_url="http://127.0.0.1:9").healthz()
    assert refused.value.type == "connection-error" and isinstance(refused.value, CtxgateError)


NASTY = ["docs/payments/refund.md", "https://wiki.acme.com/Refund_Timeout", "a%2Fb",
         "agent:main:discord:channel:123", "ü-Ω", "a b?c#d", "..", ".", "x" * 256]


async def test_ids_are_one_escaped_path_segment_and_headers_are_sent(
        make: Make, script: Script) -> None:
    script.answers = [(204, {}, None)]
    ctx = make(user_assertion="jwt.a.b", headers={"X-Trace": "t-1"})
    for doc_id in NASTY:
        await ctx.delete_document(doc_id)
    paths = [p for _, p, _ in script.seen]
    assert paths == [f"/v1/knowledge/documents/{quote(i, safe='')}" for i in NASTY[:-3]] + [
        "/v1/knowledge/documents/%2E%2E", "/v1/knowledge/documents/%2E",
        f"/v1/knowledge/documents/{'x' * 256}"]
    headers = script.seen[0][2]
    assert headers["Authorization"] == "Bearer k-123"
    assert headers["X-Ctxgate-User-Assertion"] == "jwt.a.b" and headers["X-Trace"] == "t-1"


async def test_an_injected_asgi_transport_drives_the_app(container: Container) -> None:
    app = create_app(container=container)
    token = container.settings.admin_token
    assert token is not None
    transport = httpx.ASGITransport(app=app)
    async with AsyncCtxgateClient("http://ctxgate", token.get_secret_value(),
                                  transport=transport) as admin:
        made = await admin.create_key(tenant_id="tasgi", role="runtime")
    async with AsyncCtxgateClient("http://ctxgate", transport=transport,
                                  headers={"Authorization": f"Bearer {made.api_key}"}) as ctx:
        assert (await ctx.healthz()).status == "ok"
        assert (await ctx.list_memories(user_id="alice")).memories == []
