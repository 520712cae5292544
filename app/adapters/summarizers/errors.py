"""Summarizer failures.

    SummarizerError    the model could not produce a usable summary (transport, timeout,
                       HTTP status, response shape, empty or truncated content);
                       infrastructure, not a domain error: the caller keeps the uncompacted
                       view and counts a failed attempt, and an HTTP layer answers 503.
"""

from __future__ import annotations


class SummarizerError(Exception):
    type: str = "summarizer-unavailable"
