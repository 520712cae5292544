"""The one map from errors to HTTP: RFC 9457 problem+json with stable ``type`` codes.

Nothing else in the code chooses a status code for a domain error. Validation errors list
the offending fields (``loc``, ``msg``, ``type``) but never echo the input back, so a
rejected body cannot leak into logs or responses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.adapters.embedders.errors import EmbedderError
from app.adapters.faults import FAULT_TYPES, dependency_of
from app.adapters.postgres.db import StoreBusy
from app.api import ratelimit
from app.api.schemas import SHAPE_TAGS
from app.core.errors import (
    BudgetTooSmall,
    Conflict,
    DomainError,
    ForbiddenScope,
    InvalidRequest,
    NotExplainable,
    NotFound,
    Overloaded,
    QuotaExceeded,
    StaleRevision,
    Unauthorized,
)
from app.logs import current_request
from app.ports import SummarizerError

log = logging.getLogger(__name__)
PROBLEM = "application/problem+json"
DEPENDENCY_RETRY_AFTER_S = 2  # a restart or failover takes seconds, not milliseconds

STATUS: dict[type[DomainError], tuple[int, str]] = {
    InvalidRequest: (422, "Invalid request"),
    Unauthorized: (401, "Unauthorized"),
    ForbiddenScope: (403, "Forbidden scope"),
    NotFound: (404, "Not found"),
    NotExplainable: (409, "Not explainable"),  # before Conflict: the first match maps
    Conflict: (409, "Conflict"),
    StaleRevision: (409, "Stale revision"),
    BudgetTooSmall: (422, "Budget too small"),
    Overloaded: (503, "Overloaded"),
    QuotaExceeded: (429, "Quota exceeded"),
}

HTTP_TYPES: dict[int, tuple[str, str]] = {
    400: ("malformed-request", "Malformed request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden-scope", "Forbidden scope"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    413: ("payload-too-large", "Payload too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
}


def problem(status: int, type_: str, title: str, detail: str,
            errors: list[dict[str, Any]] | None = None,
            extra: dict[str, str] | None = None) -> Response:
    """``extra``: RFC 9457 extension members (e.g. which dependency failed). Within a
    request, ``request_id`` too: the id its ``X-Request-ID`` header and log lines carry."""
    body: dict[str, Any] = {"type": type_, "title": title, "status": status, "detail": detail,
                            **(extra or {})}
    request = current_request()
    if request is not None:
        body["request_id"] = request.request_id
    if errors is not None:
        body["errors"] = errors
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM, headers=headers)


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [{"loc": _field_path(e.get("loc", ())), "msg": str(e.get("msg", "")),
             "type": str(e.get("type", ""))} for e in exc.errors()]


def _field_path(loc: Sequence[Any]) -> list[Any]:
    """``loc`` without the shape tag of a body that may be one object or a batch
    (``SHAPE_TAGS``): it names no field. ["body", "statement"], ["body", "items", 3, ...]."""
    path = list(loc)
    if len(path) > 1 and path[0] == "body" and path[1] in SHAPE_TAGS:
        del path[1]
    return path


async def _domain(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    status, title = next((v for k, v in STATUS.items() if isinstance(exc, k)),
                         (400, "Bad request"))
    response = problem(status, exc.type, title, exc.detail)
    retry_after = getattr(exc, "retry_after_s", None)
    if retry_after is not None:  # a refusal that ends by itself says when to come back
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    if isinstance(exc, QuotaExceeded):  # the policy that refused it, not the request's last
        response.headers.update(ratelimit.headers(exc.decision))
    return response


async def _validation(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = _validation_errors(exc)
    if any(e["type"] == "json_invalid" for e in errors):
        return problem(400, "malformed-json", "Malformed JSON",
                       "the request body is not valid JSON", errors)
    return problem(422, "invalid-request", "Invalid request",
                   "the request does not match the schema", errors)


async def _http(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    type_, title = HTTP_TYPES.get(exc.status_code, ("http-error", "HTTP error"))
    response = problem(exc.status_code, type_, title, str(exc.detail))
    # The router's own headers stay: a 405's Allow (RFC 9110) lists the methods there are.
    for name, value in (exc.headers or {}).items():
        response.headers.setdefault(name, value)
    return response


async def _embedder(_: Request, exc: Exception) -> Response:
    # Infrastructure, not the caller's fault: retryable, and the turn was not persisted.
    log.warning("embedder unavailable: %s", exc)
    return problem(503, EmbedderError.type, "Embedder unavailable",
                   "query embedding failed; retry, or pass query_embedding")


async def _store_busy(_: Request, exc: Exception) -> Response:
    # The pool has no overflow (app/adapters/postgres/db.py): under overload a turn waits for
    # a connection and, past the pool timeout, fails here before anything was persisted.
    log.warning("database pool exhausted: %s", exc)
    response = problem(503, StoreBusy.type, "Store busy",
                       "no database connection became free in time; retry")
    response.headers["Retry-After"] = "1"
    return response


async def _summarizer(_: Request, exc: Exception) -> Response:
    # The compaction model failed (already recorded: it counts toward the session's breaker);
    # the session is unchanged, so the caller may simply retry after Retry-After.
    assert isinstance(exc, SummarizerError)
    log.warning("summarizer unavailable (%s): %s", exc.reason, exc)
    response = problem(503, "dependency-unavailable", "Dependency unavailable",
                       f"the summarizer failed ({exc.reason}); retry later",
                       extra={"dependency": "summarizer", "reason": exc.reason})
    response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    return response


async def _dependency(request: Request, exc: Exception) -> Response:
    """A store down, restarting or out of connections is the caller's to retry, not a bug:
    503 with the dependency named. Anything the classifier does not recognise stays a 500.
    Handled here, not by the catch-all, so the connection is kept (a 500 closes it)."""
    dependency = dependency_of(exc)
    if dependency is None:
        return _internal(exc)
    container = getattr(request.app.state, "container", None)
    if container is not None:  # (always, once the app has started)
        container.metrics.deps.failed(exc)
    log.warning("%s unavailable: %s: %s", dependency, type(exc).__name__, exc)
    response = problem(503, "dependency-unavailable", "Dependency unavailable",
                       f"{dependency} is unreachable or restarting; retry",
                       extra={"dependency": dependency})
    response.headers["Retry-After"] = str(DEPENDENCY_RETRY_AFTER_S)
    return response


def _internal(exc: Exception) -> Response:
    log.exception("unhandled error", exc_info=exc)
    return problem(500, "internal", "Internal error", "an unexpected error occurred")


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Another exception raised from a dependency fault (its cause) is still that fault.
    if dependency_of(exc) is not None:
        return await _dependency(request, exc)
    return _internal(exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(EmbedderError, _embedder)
    app.add_exception_handler(StoreBusy, _store_busy)
    app.add_exception_handler(SummarizerError, _summarizer)
    for fault in FAULT_TYPES:
        app.add_exception_handler(fault, _dependency)
    app.add_exception_handler(Exception, _unexpected)
