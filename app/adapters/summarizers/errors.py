"""Summarizer failures.

    SummarizerError    the model could not produce a usable summary; ``reason`` is one of
                       ``REASONS`` (stable, a metric label): ``timeout`` (no answer in time),
                       ``unreachable`` (connection refused, reset, DNS), ``http_status``
                       (a non-2xx answer, e.g. 429 or 500), ``bad_response`` (not JSON,
                       truncated JSON, not a chat completion, empty or cut-off content).
                       Infrastructure, not a domain error: every reason counts toward the
                       session's compaction breaker, a turn keeps serving the last valid
                       view, and the explicit compaction endpoint answers 503 with
                       ``Retry-After: retry_after_s`` (the service sets it: the rest of the
                       breaker's cool-down once it is open).
"""

from __future__ import annotations

from typing import Literal

Reason = Literal["timeout", "unreachable", "http_status", "bad_response"]
REASONS: tuple[Reason, ...] = ("timeout", "unreachable", "http_status", "bad_response")


class SummarizerError(Exception):
    type: str = "summarizer-unavailable"

    def __init__(self, message: str, *, reason: Reason = "bad_response",
                 retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.retry_after_s = retry_after_s
