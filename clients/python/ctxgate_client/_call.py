"""The request-spec layer both clients share: a ``Call`` says what to send and how to read the
answer; ``RetryPolicy`` says when to send it again. No I/O here: the sync and async clients
only move bytes and sleep.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from ctxgate_client.errors import error_from_response, retry_after_seconds
from ctxgate_client.models import Event, In

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
N = TypeVar("N", bound=BaseModel)

RETRYABLE_STATUS = frozenset({429, 503})
_EVENTS: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


@dataclass(frozen=True, slots=True, kw_only=True)
class Call(Generic[T]):
    """One HTTP exchange: method, path (ids already escaped), query, JSON body; ``read`` turns
    the success answer into ``T``; ``idempotent`` allows a retry of a 503/429 answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    body: Any = None
    idempotent: bool = False
    accept: frozenset[int] = field(default_factory=frozenset)  # non-2xx answers to read
    headers: Mapping[str, str] | None = None

    def request(self) -> dict[str, Any]:
        """Keyword arguments for ``httpx.(Async)Client.request``."""
        args: dict[str, Any] = {"method": self.method, "url": self.path}
        if self.params:
            args["params"] = {k: v for k, v in self.params.items() if v is not None}
        if self.body is not None:
            args["json"] = self.body
        if self.headers:
            args["headers"] = dict(self.headers)
        return args

    def result(self, response: httpx.Response) -> T:
        """``T`` for a success (or an ``accept``-ed status); the typed error otherwise."""
        if response.is_success or response.status_code in self.accept:
            return self.read(response)
        raise error_from_response(response)


def path(template: str, *ids: str) -> str:
    """``template`` with each ``{}`` replaced by an id escaped as one path segment: '/', '%',
    '?', '#', ':' and non-ASCII are percent-encoded, and an id of dots only ('.', '..') is
    too (URL normalization would otherwise resolve it), so no id can change the route."""
    return template.format(*(segment(i) for i in ids))


def segment(value: str) -> str:
    if not value:
        raise ValueError("an id in a path must not be empty")
    if value.strip(".") == "":
        return "%2E" * len(value)
    return quote(value, safe="")


def model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: cls.model_validate_json(response.content)


def either(created: type[M], accepted: type[N]) -> Callable[[httpx.Response], M | N]:
    """``accepted`` for a 202 (the work goes on in the background), ``created`` otherwise."""
    return lambda response: (accepted if response.status_code == 202 else created
                             ).model_validate_json(response.content)


def items(cls: type[M]) -> Callable[[httpx.Response], list[M]]:
    """A batch answer ``{"items": [...]}`` as a list in request order."""
    return lambda response: [cls.model_validate(i) for i in response.json()["items"]]


def nothing(_: httpx.Response) -> None:
    return None


def read_text(response: httpx.Response) -> str:
    return response.text


def body(**fields: Any) -> dict[str, Any]:
    """A JSON body from keyword arguments: ``None`` is left out (the server's default
    applies), models are dumped in their wire form."""
    return {k: dump(v) for k, v in fields.items() if v is not None}


def dump(value: Any) -> Any:
    if isinstance(value, In):
        return value.wire()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {k: dump(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [dump(v) for v in value]
    return value


def wire_events(given: Sequence[Event | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events in wire form; dicts are checked against the event shapes first."""
    checked = _EVENTS.validate_python([dump(e) for e in given])
    return [e.wire() for e in checked]


def batch(cls: type[M], given: Sequence[M | Mapping[str, Any]]) -> dict[str, Any]:
    """``{"items": [...]}`` for a batch write, each item checked against ``cls``."""
    return {"items": [dump(g if isinstance(g, cls) else cls.model_validate(g)) for g in given]}


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """When an answer of 503 (unavailable) or 429 (rate limited) is sent again.

    Only calls that are safe to repeat are retried: GET and DELETE; PUT of a tenant's
    identity policy; PUT of a checkpoint only with ``expected_revision`` (a compare-and-set);
    POST /v1/context only with a client-chosen ``turn_id`` (the server answers a repeated
    turn_id with the first answer and appends its events once); registering, promoting and
    revoking a bundle revision, resetting a compaction breaker and requesting an erasure
    (each the same outcome twice).
    Every other POST (append events, propose memories, ingest documents, compact, create a
    key, approve or reject a memory) is sent once: its 503 is raised.

    A call is sent at most ``max_attempts`` times. The wait before the next attempt is the
    answer's ``Retry-After`` (seconds or an HTTP date), else ``backoff * 2**n`` with jitter,
    capped at ``max_backoff``; when the total of the waits would pass ``max_wait`` seconds
    the call fails with the last answer's error instead.
    ``RetryPolicy(max_attempts=1)`` turns retries off.
    """

    max_attempts: int = 3
    max_wait: float = 30.0
    backoff: float = 0.5
    max_backoff: float = 8.0

    def start(self) -> Attempts:
        return Attempts(self)


class Attempts:
    """One call's retry state: ``delay(call, response)`` is the seconds to wait before the
    next attempt, or ``None`` to stop and return (or raise) this answer."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._sent = 0
        self._waited = 0.0

    def delay(self, call: Call[Any], response: httpx.Response) -> float | None:
        self._sent += 1
        if (not call.idempotent or response.status_code not in RETRYABLE_STATUS
                or self._sent >= self._policy.max_attempts):
            return None
        wait = retry_after_seconds(response)
        if wait is None:
            jitter = 0.5 + random.random()  # noqa: S311 - spreads retries, not a secret
            wait = min(self._policy.max_backoff,
                       self._policy.backoff * 2 ** (self._sent - 1) * jitter)
        if self._waited + wait > self._policy.max_wait:
            return None
        self._waited += wait
        return wait


DEFAULT_URL = "http://127.0.0.1:8080"


def client_options(*, base_url: str | None, api_key: str | None, user_assertion: str | None,
                   headers: Mapping[str, str] | None,
                   timeout: float | httpx.Timeout) -> dict[str, Any]:
    """The ``httpx`` client's options. ``base_url`` defaults to ``$CTXGATE_URL`` (else
    http://127.0.0.1:8080) and ``api_key`` to ``$CTXGATE_API_KEY``; ``headers`` are sent on
    every request and may override the ones the key and the assertion make."""
    key = api_key if api_key is not None else os.environ.get("CTXGATE_API_KEY")
    sent: dict[str, str] = {"Accept": "application/json, application/problem+json"}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    if user_assertion:
        sent["X-Ctxgate-User-Assertion"] = user_assertion
    sent.update(headers or {})
    return {"base_url": base_url or os.environ.get("CTXGATE_URL") or DEFAULT_URL,
            "headers": sent, "timeout": timeout}
