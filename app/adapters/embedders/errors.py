"""Embedder failures.

    EmbedderError          the embedder could not produce valid vectors (transport, HTTP
                           status, timeout, response shape or dimension); infrastructure, not
                           a domain error: the HTTP layer should answer 503, not 4xx.
"""

from __future__ import annotations


class EmbedderError(Exception):
    type: str = "embedder-unavailable"
