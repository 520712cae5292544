"""Structured logs: what a log line knows of its request, and the process's logging config.

Every record passes ``RequestFields``, which adds the current request's ``request_id`` and
the current ``trace_id`` (null outside a request or trace), so any line — a warning, a 500's
traceback — can be tied to its access line and its trace. The access line itself
(``app.api.access``) is one per request on the ``ctxgate.access`` logger.

Format (``CTXGATE_LOG_FORMAT``): ``json`` (one object per line: time in UTC, level, logger,
message, request_id, trace_id and the record's extra fields) or ``text``; level
(``CTXGATE_LOG_LEVEL``): access lines are INFO. Nothing here logs bodies, query strings or
content, and callers must not pass them as extra fields either.
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import trace

LogFormat = Literal["json", "text"]
ACCESS_LOGGER = "ctxgate.access"
# A caller's X-Request-ID is kept when it is short and plain: it is echoed in a header and
# written to every log line, so anything else (long, spaces, quotes, control characters) is
# replaced by a generated one.
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=-]{0,127}")


@dataclass(slots=True)
class RequestInfo:
    """One request as the logs see it; tenant and key id are filled in once authenticated."""

    request_id: str
    trace_id: str | None = None
    tenant: str | None = None
    key_id: str | None = None


_current: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar(
    "ctxgate_request", default=None)


def request_id_from(header: str | None) -> str:
    """The caller's request id when it is sane, else a new one (32 hex digits)."""
    if header is not None and _REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def bind_request(info: RequestInfo) -> contextvars.Token[RequestInfo | None]:
    return _current.set(info)


def unbind_request(token: contextvars.Token[RequestInfo | None]) -> None:
    _current.reset(token)


def current_request() -> RequestInfo | None:
    return _current.get()


def note_principal(tenant: str, key_id: str) -> None:
    """Record who the current request authenticated as (for its access line)."""
    info = _current.get()
    if info is not None:
        info.tenant, info.key_id = tenant, key_id


def trace_id_hex(trace_id: int) -> str | None:
    return format(trace_id, "032x") if trace_id else None


class RequestFields(logging.Filter):
    """Adds ``request_id`` and ``trace_id`` to every record (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = _current.get()
        if not hasattr(record, "request_id"):
            record.request_id = info.request_id if info is not None else None
        if not hasattr(record, "trace_id"):
            span = trace.get_current_span().get_span_context()
            record.trace_id = trace_id_hex(span.trace_id) if span.is_valid else (
                info.trace_id if info is not None else None)
        return True


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
JSON_FIELDS = ("levelname", "name", "message")
JSON_RENAMED = {"levelname": "level", "name": "logger"}
# Record attributes that are not fields: uvicorn's ANSI-coloured copy of each message, and
# the asyncio task name Python 3.12 adds to every record.
JSON_SKIPPED = ("color_message", "taskName")


def formatter(fmt: LogFormat) -> logging.Formatter:
    """``json``: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message`` and the
    record's other fields; ``text``: one readable line with the request id."""
    if fmt == "json":
        from pythonjsonlogger.core import RESERVED_ATTRS
        from pythonjsonlogger.json import JsonFormatter

        return JsonFormatter(list(JSON_FIELDS), rename_fields=JSON_RENAMED, timestamp="time",
                             reserved_attrs=[*RESERVED_ATTRS, *JSON_SKIPPED],
                             json_ensure_ascii=False)
    return logging.Formatter(TEXT_FORMAT)


def logging_config(level: str, fmt: LogFormat) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the server (uvicorn applies it in every worker):
    one stderr handler with ``RequestFields``; uvicorn's own loggers propagate to it, and
    its access log is silenced (ours replaces it), as are httpx's per-request lines."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request": {"()": RequestFields}},
        "formatters": {"main": {"()": formatter, "fmt": fmt}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "formatter": "main", "filters": ["request"]}},
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": {"level": level.upper(), "handlers": [], "propagate": True},
            "uvicorn.error": {"level": level.upper(), "handlers": [], "propagate": True},
            "uvicorn.access": {"level": "CRITICAL", "handlers": [], "propagate": False},
            # httpx logs every outgoing request's URL at INFO: its spans say as much; alembic
            # lists its plugins at INFO whenever a worker checks the schema's revision.
            "httpx": {"level": "WARNING"},
            "alembic.runtime.plugins": {"level": "WARNING"},
        },
    }
