"""ctxgate as a Hermes memory provider (hermes-agent's ``agent/memory_provider.py``).

Hermes asks its one external memory provider, through ``agent/memory_manager.py``:
``prefetch(query)`` before each turn, in a thread it abandons after 8 s, and injects the text
returned into that turn's user message (fenced as ``<memory-context>``, at most 6,000
characters kept whole: ``agent/context_engine.py``); ``sync_turn(user, assistant,
messages=...)`` after each completed turn, on a background worker that runs one write at a
time, with ``messages`` the OpenAI-style conversation so far. This module answers both
through the HTTP API with the configuration of ``ctxgate mcp`` (``app.integrations.config``):

- ``prefetch`` → ``POST /v1/context`` for ``CTXGATE_USER_ID`` in the Hermes session (its
  task, domain, data level and bundle from the same variables) and returns
  ``context_text`` of the answer: instructions, pinned memories, task state, references, and
  low-trust data fenced as the model renderings fence it.
- ``sync_turn`` → ``POST /v1/sessions/{id}/events``: the user message, the turn's tool calls
  and results (from ``messages`` after the last user message, with any assistant text that
  came with them), then the final answer. Writes happen only for Hermes's ``primary``
  agent, as its contract asks (a cron or subagent context would write into the user's
  session).

Never blocks Hermes: a missing variable makes the provider unavailable (``is_available``,
no network), and any failure of a call is logged and answered with ``""`` / nothing. Every
call is sent once (no retries) with ``CTXGATE_HOOK_TIMEOUT_S`` (default 5 s, under Hermes's
8 s) as its connect and read timeouts. ``prefetch`` asks at the turn rather than through
``queue_prefetch`` (which Hermes calls after a turn with that turn's query): the context is
assembled for the query about to be answered. The Hermes plugin that loads this class is
``clients/hermes-plugin/ctxgate/`` (it adds Hermes's ``MemoryProvider`` base class); this
module imports nothing of Hermes, so it is typed and tested on its own.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from ctxgate_client import CtxgateClient, Message, RetryPolicy, ToolCall, ToolResult

from app.integrations.claude_code_hook import MAX_EVENT_CHARS, MAX_QUERY_CHARS, as_text, clip
from app.integrations.config import Config, ConfigError, load
from app.integrations.context_text import context_text

logger = logging.getLogger(__name__)

NAME = "ctxgate"
# Hermes keeps a provider's text whole up to 6,000 characters (then head + tail only): the
# context text is the stable and dynamic shares of the budget, so 1,500 tokens fit.
HERMES_BUDGET_TOKENS = 1500
CLIPPED = "\n[clipped by ctxgate]"
Event = Message | ToolCall | ToolResult


def _text(content: Any) -> str:
    """An OpenAI message's content as text: a string, or the text of its typed parts."""
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return as_text(content)


def _arguments(raw: Any) -> dict[str, Any] | list[Any] | str | None:
    """A tool call's arguments: OpenAI sends a JSON string; kept as it is if it is not JSON."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict | list) else raw
    return raw if isinstance(raw, dict | list) or raw is None else as_text(raw)


def turn_events(user: str, assistant: str,
                messages: Sequence[Mapping[str, Any]] | None) -> list[Event]:
    """The events of one completed turn, in order: ``user``, the tool work in ``messages``
    after its last user message, ``assistant``. Malformed tool entries are skipped."""
    tail: Sequence[Mapping[str, Any]] = []
    if messages:
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        tail = messages[users[-1] + 1:] if users else []
    events: list[Event] = [Message(role="user", content=clip(user, MAX_EVENT_CHARS, CLIPPED))]
    for m in tail:
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        if calls:
            said = _text(m.get("content")).strip()
            if said:
                events.append(Message(role="assistant",
                                      content=clip(said, MAX_EVENT_CHARS, CLIPPED)))
            for c in calls:
                fn = c.get("function") if isinstance(c, Mapping) else None
                if isinstance(fn, Mapping) and c.get("id") and fn.get("name"):
                    events.append(ToolCall(call_id=str(c["id"]), name=str(fn["name"]),
                                           arguments=_arguments(fn.get("arguments"))))
        elif m.get("role") == "tool" and m.get("tool_call_id"):
            events.append(ToolResult(call_id=str(m["tool_call_id"]),
                                     content=clip(_text(m.get("content")), MAX_EVENT_CHARS,
                                                  CLIPPED)))
    events.append(Message(role="assistant", content=clip(assistant, MAX_EVENT_CHARS, CLIPPED)))
    return events


class CtxgateMemory:
    """Hermes's ``MemoryProvider`` methods over ctxgate (context only: no tools).

    ``env`` defaults to ``os.environ``; ``transport`` is for tests that drive an app
    in-process. Safe to call from Hermes's threads: one httpx client serves them all."""

    def __init__(self, env: Mapping[str, str] | None = None, *,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._env = os.environ if env is None else env
        self._transport = transport
        self._config: Config | None = None
        self._client: CtxgateClient | None = None
        self._session_id = ""
        self._writes = True

    @property
    def name(self) -> str:
        return NAME

    def is_available(self) -> bool:
        """Whether the variables are set and well formed (no network, as Hermes asks)."""
        try:
            load(self._env)
        except ConfigError:
            return False
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Remember the session; connect lazily. A bad configuration is logged and leaves
        the provider inert."""
        self._session_id = session_id
        self._writes = kwargs.get("agent_context", "primary") == "primary"
        try:
            config = load(self._env)
        except ConfigError as exc:
            logger.warning("ctxgate memory provider is off: %s", exc)
            return
        self.shutdown()
        self._config = config
        self._client = CtxgateClient(
            config.url, config.api_key, user_assertion=config.user_assertion,
            timeout=httpx.Timeout(config.hook_timeout_s), retry=RetryPolicy(max_attempts=1),
            transport=self._transport)

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "",
                          reset: bool = False, rewound: bool = False, **kwargs: Any) -> None:
        """``/new``, ``/resume``, ``/branch`` and compression move the turns to another
        session id; the next writes and reads follow it. Nothing else is cached per session,
        so a reset or a rewind needs no more."""
        self._session_id = new_session_id

    def system_prompt_block(self) -> str:
        return ""

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []  # the MCP server gives the model ctxgate's tools, under Hermes's MCP config

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """The assembled context for the turn about to run, as text; ``""`` when ctxgate is
        unconfigured, unreachable or refuses (logged)."""
        client, config = self._client, self._config
        if client is None or config is None or not query.strip():
            return ""
        d = config.defaults
        try:
            turn = client.assemble_context(
                user_id=config.user_id, query=clip(query, MAX_QUERY_CHARS, CLIPPED),
                session_id=session_id or self._session_id or None, task_id=d.task_id,
                budget=d.budget_tokens or HERMES_BUDGET_TOKENS, domain=d.domain,
                data_level=d.data_level,
                workspace={"bundle_id": d.bundle_id} if d.bundle_id else None)
            return context_text(turn)
        except Exception as exc:  # best effort by Hermes's contract: the turn goes on
            logger.warning("ctxgate prefetch failed, the turn goes on without it: %s", exc)
            return ""

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: list[dict[str, Any]] | None = None) -> None:
        """Append the completed turn to the session (primary agent only); failures logged."""
        client, config = self._client, self._config
        session = session_id or self._session_id
        if client is None or config is None or not self._writes or not session:
            return
        try:
            client.append_events(session, user_id=config.user_id,
                                 events=turn_events(user_content, assistant_content, messages))
        except Exception as exc:  # best effort by Hermes's contract: never fail the turn
            logger.warning("ctxgate sync_turn failed, the turn is not recorded: %s", exc)

    def shutdown(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
