"""Typed errors, built from the server's RFC 9457 problem+json answers.

    CtxgateError                 any failed call: status, type, title, detail
    ├── BadRequestError          400  malformed-json, malformed-request
    ├── UnauthorizedError        401  unauthorized (no key, unknown or revoked key)
    ├── ForbiddenError           403  forbidden-scope
    ├── NotFoundError            404  not-found (also another tenant's or user's resource)
    ├── ConflictError            409  conflict
    │   └── StaleRevisionError   409  stale-revision (optimistic concurrency lost)
    ├── InvalidRequestError      422  invalid-request; ``errors`` lists loc / msg / type
    │   └── BudgetTooSmallError  422  budget-too-small
    ├── PayloadTooLargeError     413  payload-too-large
    ├── RateLimitedError         429  (retried first; ``retry_after`` in seconds)
    ├── ServerError              5xx  other than 503
    ├── UnavailableError         503  store-busy, embedder-unavailable, ... (retried first)
    └── CtxgateConnectionError   status 0: the request got no answer (refused, timed out)

The class follows the status; ``type`` is the server's stable machine word and is what to
branch on for finer cases. A body that is not problem+json still gives the right class,
with ``type`` ``"http-<status>"`` and the body's start as ``detail``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

__all__ = [
    "BadRequestError",
    "BudgetTooSmallError",
    "ConflictError",
    "CtxgateConnectionError",
    "CtxgateError",
    "ForbiddenError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ServerError",
    "StaleRevisionError",
    "UnauthorizedError",
    "UnavailableError",
    "error_from_response",
]


class CtxgateError(Exception):
    """A call that did not succeed. ``status`` is the HTTP status (0: no answer at all)."""

    def __init__(self, *, status: int, type: str, title: str, detail: str,
                 errors: list[dict[str, Any]] | None = None, retry_after: float | None = None,
                 body: Any = None) -> None:
        where = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}"
                          for e in (errors or [])[:3] if isinstance(e, dict))
        message = f"{status} {type}: {detail}" if status else f"{type}: {detail}"
        super().__init__(f"{message} ({where})" if where else message)
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = errors
        self.retry_after = retry_after
        self.body = body


class BadRequestError(CtxgateError):
    pass


class UnauthorizedError(CtxgateError):
    pass


class ForbiddenError(CtxgateError):
    pass


class NotFoundError(CtxgateError):
    pass


class ConflictError(CtxgateError):
    pass


class StaleRevisionError(ConflictError):
    pass


class InvalidRequestError(CtxgateError):
    """422: ``errors`` holds the server's field errors (``loc``, ``msg``, ``type``)."""


class BudgetTooSmallError(InvalidRequestError):
    pass


class PayloadTooLargeError(CtxgateError):
    pass


class RateLimitedError(CtxgateError):
    pass


class ServerError(CtxgateError):
    pass


class UnavailableError(CtxgateError):
    pass


class CtxgateConnectionError(CtxgateError):
    """No HTTP answer: the connection failed or the timeout passed (``__cause__``: httpx's)."""


_BY_STATUS: dict[int, type[CtxgateError]] = {
    400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError,
    409: ConflictError, 413: PayloadTooLargeError, 422: InvalidRequestError,
    429: RateLimitedError, 503: UnavailableError,
}
_BY_TYPE: dict[str, type[CtxgateError]] = {
    "stale-revision": StaleRevisionError, "budget-too-small": BudgetTooSmallError,
}


def retry_after_seconds(response: httpx.Response) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; ``None`` when absent or bad."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(response: httpx.Response) -> CtxgateError:
    """The typed error for a non-success answer (problem+json or not)."""
    status = response.status_code
    try:
        body: Any = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    problem = body if isinstance(body, dict) else {}
    type_ = str(problem.get("type") or f"http-{status}")
    errors = problem.get("errors")
    cls = _BY_TYPE.get(type_) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else CtxgateError
    return cls(status=status, type=type_,
               title=str(problem.get("title") or response.reason_phrase or "HTTP error"),
               detail=str(problem.get("detail") or response.text[:500]),
               errors=errors if isinstance(errors, list) else None,
               retry_after=retry_after_seconds(response), body=body)


def connection_error(exc: httpx.TransportError) -> CtxgateConnectionError:
    type_ = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection-error"
    return CtxgateConnectionError(status=0, type=type_, title="No answer",
                            detail=str(exc) or type(exc).__name__)
