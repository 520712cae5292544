"""The request's envelope: its id, its server span (joined to the runtime's trace) and its
one access line.

``RequestEnvelope`` wraps the whole app, outside Starlette's error middleware, so that a 500
too is answered with ``X-Request-ID``, its problem+json carries ``request_id``
(``app.api.errors``), and its span and access line record the status the caller saw.

The span and the line hold ids, sizes, the route template and the status — never the raw
path (it holds ids the template names), the query string, headers or bodies.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.logs import (
    ACCESS_LOGGER,
    RequestInfo,
    bind_request,
    request_id_from,
    trace_id_hex,
    unbind_request,
)
from app.tracing import incoming_context

access_log = logging.getLogger(ACCESS_LOGGER)
REQUEST_ID_HEADER = b"x-request-id"
_TRACE_HEADERS = ("traceparent", "tracestate")
_NO_TRACING = trace.NoOpTracer()
_CONVERTER = re.compile(r"\{(\w+):\w+\}")
# Probes and scrapes come every few seconds from each balancer and Prometheus: logged, never
# traced (their store calls then have no parent and are not sampled either).
UNTRACED = frozenset({"/healthz", "/readyz", "/metrics"})


class RequestEnvelope:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            key = name.decode("latin-1").lower()
            if key in _TRACE_HEADERS or key == "x-request-id":
                headers.setdefault(key, value.decode("latin-1"))
        info = RequestInfo(request_id=request_id_from(headers.get("x-request-id")))
        echo = (REQUEST_ID_HEADER, info.request_id.encode())
        method = str(scope["method"])
        status = 500
        sent = 0
        start = time.perf_counter()

        async def respond(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [*(h for h in message.get("headers", ())
                                        if h[0].lower() != REQUEST_ID_HEADER), echo]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        token = bind_request(info)
        try:
            runtime = incoming_context(headers)
            tracer = _NO_TRACING if scope["path"] in UNTRACED else _tracer(scope)
            with tracer.start_as_current_span(
                    method, context=runtime, kind=SpanKind.SERVER, record_exception=False,
                    set_status_on_exception=False) as span:
                own = span.get_span_context()
                parent = trace.get_current_span(runtime).get_span_context()
                ctx = own if own.is_valid else parent  # tracing off: still the runtime's id
                info.trace_id = trace_id_hex(ctx.trace_id) if ctx.is_valid else None
                try:
                    await self.app(scope, receive, respond)
                except BaseException as exc:
                    span.set_attribute("error.type", type(exc).__name__)
                    raise
                finally:
                    route = _route(scope)
                    duration_ms = round((time.perf_counter() - start) * 1000, 3)
                    _finish(span, method=method, route=route, status=status, sent=sent,
                            info=info)
                    access_log.info(
                        "%s %s %s %.1fms", method, route or "-", status, duration_ms,
                        extra={"method": method, "route": route, "status": status,
                               "duration_ms": duration_ms, "response_bytes": sent,
                               "tenant": info.tenant, "key_id": info.key_id})
        finally:
            unbind_request(token)


def _tracer(scope: Scope) -> Tracer:
    app: Any = scope.get("app")
    container = getattr(getattr(app, "state", None), "container", None)
    tracing = getattr(container, "tracing", None)
    return tracing.tracer if tracing is not None else _NO_TRACING


def _route(scope: Scope) -> str | None:
    """The matched route's template without parameter converters
    (``/v1/sessions/{session_id}/events``); None when no route matched (a 404 of the
    router)."""
    path = getattr(scope.get("route"), "path", None)
    return _CONVERTER.sub(r"{\1}", path) if isinstance(path, str) else None


def _finish(span: trace.Span, *, method: str, route: str | None, status: int, sent: int,
            info: RequestInfo) -> None:
    span.update_name(f"{method} {route}" if route else method)
    attributes: dict[str, str | int] = {
        "http.request.method": method, "http.response.status_code": status,
        "http.response.body.size": sent, "ctxgate.request_id": info.request_id}
    if route:
        attributes["http.route"] = route
    if info.tenant is not None and info.key_id is not None:
        attributes |= {"ctxgate.tenant_id": info.tenant, "ctxgate.key_id": info.key_id}
    span.set_attributes(attributes)
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR, str(status)))
