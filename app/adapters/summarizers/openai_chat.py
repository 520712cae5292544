"""Summaries from any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp).

Contract (implements ``app.core.compaction.AsyncSummarizer``):
- ``POST {base_url}/chat/completions`` with ``{"model", "messages", "temperature": 0}`` and,
  when an API key is set, ``Authorization: Bearer <key>``. The system prompt demands that
  every constraint and pinned text is copied VERBATIM (qualifiers such as only / except /
  before <date> / 仅限 / 除外 / 上限 / 截止 are never paraphrased or dropped) and that every
  statement cites its ``[session://…/events/N]`` ref; the user message lists the constraints,
  the pins and the transcript (each event cut at ``MAX_EVENT_CHARS``).
- The response must be ``{"choices": [{"message": {"content": "<text>"}, ...}]}`` with
  non-empty text; ``finish_reason == "length"`` is a truncated summary and refused; the text
  is cut at ``request.max_chars``.
- Every failure raises ``SummarizerError`` naming the cause, never the key or the content,
  with its ``reason`` (timeout, unreachable, http_status, bad_response). ``timeout_s``
  bounds the whole request: a model that hangs fails here, in the background job that
  called it (a turn never waits for it; see app/service/compaction.py).
  Whether the summary kept the qualifiers is not this adapter's job: ``validate_compaction``
  checks it, and the lifecycle retries or opens the breaker.
- A client passed in is borrowed (the caller closes it); one created here is closed by
  ``aclose()``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.core.compaction.text import render_event
from app.core.compaction.values import SummaryRequest
from app.ports import SummarizerError

MAX_EVENT_CHARS = 2000
SYSTEM_PROMPT = (
    "You compress the older part of an agent session into a factual summary.\n"
    "Rules:\n"
    "1. Copy every CONSTRAINT and every PINNED line VERBATIM, character for character. Never "
    "paraphrase, shorten or drop a qualifier (only, except, excluding, unless, at most, no "
    "more than, before/by a date, deadline, must first, requires approval, 仅限, 只, 除外, "
    "除了, 不含, 上限, 最多, 不超过, 截止, 之前, 须先, 前提).\n"
    "2. Never state a conclusion that a constraint restricts without the restriction.\n"
    "3. End every statement with the [session://.../events/N] ref it comes from.\n"
    "4. Keep decisions, pending approvals, errors, tool effects with their ids; drop chatter.\n"
    "5. Output plain text, one statement per line, no preamble."
)


def build_messages(request: SummaryRequest) -> list[dict[str, str]]:
    """The chat messages for one request (pure; exposed for tests)."""
    lines = ["CONSTRAINTS (verbatim):", *(f"- [{c.kind}] {c.text} [{c.source_ref or 'pinned'}]"
                                         for c in request.constraints)]
    lines += ["PINNED (verbatim):", *(f"- {p}" for p in request.pinned)]
    lines += [f"TRANSCRIPT (summarize in at most {request.max_chars} characters):"]
    lines += [render_event(e, request.session_id)[:MAX_EVENT_CHARS] for e in request.events]
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "\n".join(lines)}]


def parse_content(body: Any) -> str:
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise SummarizerError("chat response has no 'choices' list")
    first = choices[0]
    if first.get("finish_reason") == "length":
        raise SummarizerError("chat response was truncated (finish_reason=length)")
    message = first.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        raise SummarizerError("chat response has no message content")
    return content.strip()


class OpenAIChatSummarizer:
    def __init__(self, base_url: str, api_key: str | None, model: str, *,
                 client: httpx.AsyncClient | None = None, timeout_s: float = 60) -> None:
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient()
        self._timeout_s = timeout_s

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def summarize(self, request: SummaryRequest) -> str:
        payload = {"model": self.model, "messages": build_messages(request), "temperature": 0}
        try:
            async with asyncio.timeout(self._timeout_s):  # the whole exchange, not per read
                resp = await self._client.post(self._url, json=payload, headers=self._headers,
                                               timeout=self._timeout_s)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise SummarizerError(f"chat request to {self._url} timed out",
                                  reason="timeout") from exc
        except httpx.HTTPError as exc:
            raise SummarizerError(f"chat request to {self._url} failed: {type(exc).__name__}",
                                  reason="unreachable") from exc
        if resp.is_error:
            snippet = resp.text.strip().replace("\n", " ")[:200] or resp.reason_phrase
            raise SummarizerError(f"chat endpoint {self._url} answered HTTP "
                                  f"{resp.status_code}: {snippet}", reason="http_status")
        try:
            body = resp.json()
        except ValueError as exc:  # garbage, or JSON cut off mid-document
            raise SummarizerError("chat response is not JSON") from exc
        return parse_content(body)[:request.max_chars]
