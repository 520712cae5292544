"""ASGI middleware: a hard body-size limit, per-route request metrics, RateLimit headers.

The body limit counts the bytes actually received, not just the Content-Length header, so a
chunked upload cannot slip past it; an oversized body is a 413 problem and nothing is written.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import ratelimit
from app.api.errors import problem


class _TooLarge(Exception):
    pass


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(413, "payload-too-large", "Payload too large",
                           f"the request body exceeds {self.max_bytes} bytes")
        await response(scope, receive, send)


class RequestMetrics:
    """Observe latency per route template (not per raw path, which would explode labels)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            self._observe(scope, status, time.perf_counter() - start)

    @staticmethod
    def _observe(scope: Scope, status: int, seconds: float) -> None:
        app: Any = scope.get("app")
        container = getattr(getattr(app, "state", None), "container", None)
        if container is None:
            return
        route = scope.get("route")
        path = getattr(route, "path", "unmatched")
        container.metrics.request_latency.labels(
            route=path, method=scope["method"], status=str(status)).observe(seconds)


class RateLimitHeaders:
    """The RateLimit headers of the request's quota answer (``app.api.ratelimit``; the
    principal dependency leaves it in the request state) on whatever response it gets. A
    response that carries its own (a 429 for the limit that refused it) keeps them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            decision = scope.get("state", {}).get(ratelimit.STATE)
            if message["type"] == "http.response.start" and decision is not None:
                headers = MutableHeaders(scope=message)
                if "ratelimit" not in headers:
                    for name, value in ratelimit.headers(decision).items():
                        headers.append(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)
