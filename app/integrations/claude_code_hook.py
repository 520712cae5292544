"""``ctxgate hook claude-code``: Claude Code's hook events in, ctxgate calls out.

Claude Code runs the command with the event's JSON on stdin, as its hooks reference
documents it (https://code.claude.com/docs/en/hooks): the common fields ``session_id``,
``transcript_path``, ``cwd``, ``permission_mode`` and ``hook_event_name``, plus per event
``source`` (SessionStart), ``prompt`` (UserPromptSubmit), ``tool_name``, ``tool_input``,
``tool_response``, ``tool_use_id`` (PostToolUse; ``error`` for PostToolUseFailure),
``trigger`` and ``custom_instructions`` (PreCompact), ``stop_hook_active`` and, in newer
versions, ``last_assistant_message`` (Stop). What it does per event, for the end user
``CTXGATE_USER_ID`` (configuration: ``app.integrations.config``), with the Claude Code session
id as the ctxgate session id:

* ``SessionStart`` — assembles a turn (query: the configured task's goal, else a start-of-
  session line) and prints ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
  "additionalContext": ...}}``, which Claude Code adds to the context.
* ``UserPromptSubmit`` — appends the prompt and assembles the turn in one call
  (``POST /v1/context`` with ``append_events``, under a fresh client ``turn_id`` so a retry
  never appends twice) and prints the same JSON for ``UserPromptSubmit``.
* ``PostToolUse`` / ``PostToolUseFailure`` — appends the tool call and its result (or error)
  as one ``tool_call`` + ``tool_result`` pair in one request; the call id is the payload's
  ``tool_use_id``, else a hash of the payload, so it is deterministic either way.
* ``PreCompact`` — compacts the session now (``POST /v1/sessions/{id}/compact``), committing
  its facts into ``CTXGATE_TASK_ID``'s checkpoint when one is configured.
* ``Stop`` — appends the last assistant message: ``last_assistant_message``, else the
  transcript's (JSONL at ``transcript_path``) last assistant text; nothing when neither
  has one.

It never blocks the user. The reference gives exit code 2 as the blocking error (for
UserPromptSubmit it erases the prompt) and "other exit codes" as a non-blocking error whose
stderr is shown and after which execution continues; so every failure — a payload that is
not JSON or lacks a field, an event not handled here, a bad configuration, ctxgate refusing
or not answering — writes why to stderr and exits 1, having written nothing or one whole
request (each event is one write). Every call shares one deadline,
``CTXGATE_HOOK_TIMEOUT_S`` (default 5 s), well under Claude Code's hook timeout (60 s
unless configured); a retry is only made within it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import IO, Any

import httpx
from ctxgate_client import AsyncCtxgateClient, Message, RetryPolicy, ToolCall, ToolResult
from ctxgate_client.errors import CtxgateError, NotFoundError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.integrations.config import Config, ConfigError, load
from app.integrations.context_text import context_text

EXIT_OK = 0
EXIT_NON_BLOCKING = 1  # "Other exit codes: Non-blocking error ... Execution continues."
MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
MAX_QUERY_CHARS = 32_000  # POST /v1/context's query
MAX_EVENT_CHARS = 200_000  # an event's content
CLIPPED = "\n[clipped by ctxgate hook]"
START_QUERY = "Context for the start of this coding session"
# Claude Code keeps at most 10,000 characters of additionalContext in the context (past that
# a 2,000-character preview and a file path: anthropics/claude-code#94358). The text is the
# stable and dynamic shares of the budget (0.65 by default): 3,000 tokens stay under it.
HOOK_BUDGET_TOKENS = 3000


class HookError(Exception):
    """Why the hook did nothing (or stopped): the one line written to stderr."""


class Payload(BaseModel):
    """The common input of every event; other fields are kept and ignored."""

    model_config = ConfigDict(extra="allow")
    hook_event_name: str
    session_id: str = Field(min_length=1, max_length=256)
    transcript_path: str | None = None
    cwd: str | None = None


class SessionStart(Payload):
    source: str | None = None


class PromptSubmit(Payload):
    prompt: str = Field(min_length=1)


class ToolUse(Payload):
    tool_name: str = Field(min_length=1, max_length=200)
    tool_input: Any = None
    tool_response: Any = None
    tool_use_id: str | None = Field(default=None, min_length=1, max_length=256)
    error: Any = None  # PostToolUseFailure


class PreCompact(Payload):
    trigger: str | None = None
    custom_instructions: str | None = None


class Stop(Payload):
    stop_hook_active: bool = False
    last_assistant_message: str | None = None


Output = dict[str, Any] | None


class Hook:
    """One event's work, against one client with the configuration's defaults."""

    def __init__(self, client: AsyncCtxgateClient, config: Config,
                 env: Mapping[str, str]) -> None:
        self.client, self.config, self.env = client, config, env

    def _workspace(self, p: Payload) -> dict[str, str] | None:
        """The configured bundle, with ``cwd`` relative to the project when inside it."""
        bundle = self.config.defaults.bundle_id
        if bundle is None:
            return None
        root, cwd = self.env.get("CLAUDE_PROJECT_DIR"), p.cwd
        rel = ""
        if root and cwd and Path(cwd).is_relative_to(root):
            rel = Path(cwd).relative_to(root).as_posix()
        return {"bundle_id": bundle, "cwd": "" if rel == "." else rel}

    async def _turn(self, p: Payload, event: str, query: str,
                    append: list[Message] | None = None) -> Output:
        d = self.config.defaults
        turn = await self.client.assemble_context(
            user_id=self.config.user_id, query=clip(query, MAX_QUERY_CHARS, ""),
            session_id=p.session_id, task_id=d.task_id, budget=budget_of(self.config),
            domain=d.domain, data_level=d.data_level, workspace=self._workspace(p),
            append_events=append, turn_id=f"cc-{uuid.uuid4().hex}" if append else None)
        text = context_text(turn)
        if not text:
            return None
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}

    async def session_start(self, p: SessionStart) -> Output:
        goal = None
        if self.config.defaults.task_id is not None:
            try:
                goal = (await self.client.get_checkpoint(
                    self.config.defaults.task_id, user_id=self.config.user_id)).goal
            except NotFoundError:  # no checkpoint yet: the session starts without one
                goal = None
        return await self._turn(p, "SessionStart", goal or START_QUERY)

    async def prompt_submit(self, p: PromptSubmit) -> Output:
        prompt = Message(role="user", content=clip(p.prompt, MAX_EVENT_CHARS))
        return await self._turn(p, "UserPromptSubmit", p.prompt, [prompt])

    async def tool_use(self, p: ToolUse) -> Output:
        failed = p.hook_event_name == "PostToolUseFailure"
        call_id = p.tool_use_id or "cc_" + hashlib.sha256(json.dumps(
            [p.session_id, p.tool_name, p.tool_input, p.tool_response, p.error],
            sort_keys=True, default=str).encode()).hexdigest()[:32]
        result = p.error if failed else p.tool_response
        arguments = p.tool_input if isinstance(p.tool_input, dict | list | str | None) \
            else json.dumps(p.tool_input)
        await self.client.append_events(p.session_id, user_id=self.config.user_id, events=[
            ToolCall(call_id=call_id, name=p.tool_name, arguments=arguments),
            ToolResult(call_id=call_id, content=clip(as_text(result), MAX_EVENT_CHARS),
                       is_error=failed)])
        return None

    async def pre_compact(self, p: PreCompact) -> Output:
        d = self.config.defaults
        await self.client.compact_session(p.session_id, user_id=self.config.user_id,
                                          budget_tokens=budget_of(self.config),
                                          task_id=d.task_id)
        return None

    async def stop(self, p: Stop) -> Output:
        text = p.last_assistant_message or last_assistant_text(p.transcript_path)
        if text and text.strip():
            await self.client.append_events(
                p.session_id, user_id=self.config.user_id,
                events=[Message(role="assistant", content=clip(text, MAX_EVENT_CHARS))])
        return None


Handler = Callable[[Hook, Any], Awaitable[Output]]
EVENTS: dict[str, tuple[type[Payload], Handler]] = {
    "SessionStart": (SessionStart, Hook.session_start),
    "UserPromptSubmit": (PromptSubmit, Hook.prompt_submit),
    "PostToolUse": (ToolUse, Hook.tool_use),
    "PostToolUseFailure": (ToolUse, Hook.tool_use),
    "PreCompact": (PreCompact, Hook.pre_compact),
    "Stop": (Stop, Hook.stop),
}


def budget_of(config: Config) -> int:
    return config.defaults.budget_tokens or HOOK_BUDGET_TOKENS


def clip(text: str, limit: int, marker: str = CLIPPED) -> str:
    return text if len(text) <= limit else text[: limit - len(marker)] + marker


def as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)


def last_assistant_text(transcript_path: str | None) -> str | None:
    """The text of the transcript's last assistant message that has any. Claude Code writes
    one JSONL line per content block, each with its message's ``message.id``: the text
    blocks of that message's lines are joined in order. None when unreadable or absent."""
    if not transcript_path:
        return None
    try:
        lines = Path(transcript_path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found: list[tuple[Any, str]] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant" or \
                entry.get("type", "assistant") != "assistant":
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            b.get("text", "") for b in content or []
            if isinstance(b, dict) and b.get("type") == "text"]
        text = "\n".join(t for t in texts if isinstance(t, str) and t.strip())
        if text:
            found.append((message.get("id"), text))
    if not found:
        return None
    last_id = found[-1][0]
    if last_id is None:
        return found[-1][1]
    return "\n".join(t for i, t in found if i == last_id)


def _parse(raw: bytes) -> tuple[str, Payload]:
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise HookError(f"the payload is larger than {MAX_PAYLOAD_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise HookError(f"the payload on stdin is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise HookError("the payload on stdin is not a JSON object")
    event = doc.get("hook_event_name")
    if event not in EVENTS:
        raise HookError(f"unknown hook event {event!r}: ctxgate handles "
                        f"{', '.join(EVENTS)}")
    model, _ = EVENTS[event]
    try:
        return event, model.model_validate(doc)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}"
                           for e in exc.errors())
        raise HookError(f"the {event} payload is not as documented ({fields})") from None


async def _handle(event: str, payload: Payload, config: Config,
                  env: Mapping[str, str]) -> Output:
    deadline = config.hook_timeout_s
    async with AsyncCtxgateClient(
            config.url, config.api_key, user_assertion=config.user_assertion,
            timeout=httpx.Timeout(deadline),
            retry=RetryPolicy(max_attempts=2, max_wait=deadline / 2)) as client:
        return await EVENTS[event][1](Hook(client, config, env), payload)


def run(raw: bytes, env: Mapping[str, str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) for one payload: the hook without its process."""
    event = "?"
    try:
        event, payload = _parse(raw)
        config = load(env)
        where = f"ctxgate at {config.url}"
        late = HookError(f"{where} did not answer within {config.hook_timeout_s:g} s "
                         "(CTXGATE_HOOK_TIMEOUT_S)")
        try:
            output = asyncio.run(asyncio.wait_for(_handle(event, payload, config, env),
                                                  config.hook_timeout_s))
        except TimeoutError:
            raise late from None
        except CtxgateError as exc:
            if exc.type == "timeout":  # the client's own timeout, the same deadline
                raise late from None
            raise HookError(f"{where} could not be reached: {exc.detail}" if not exc.status
                            else f"{where} refused: {exc.title} ({exc.type}): {exc.detail}"
                            ) from None
    except (HookError, ConfigError) as exc:
        return (EXIT_NON_BLOCKING, "",
                f"ctxgate hook ({event}): {exc}; continuing without ctxgate\n")
    return EXIT_OK, json.dumps(output, ensure_ascii=False) if output else "", ""


def main(stdin: IO[bytes] | None = None, env: Mapping[str, str] | None = None) -> int:
    code, out, err = run((stdin or sys.stdin.buffer).read(MAX_PAYLOAD_BYTES + 1),
                         os.environ if env is None else env)
    if out:
        sys.stdout.write(out + "\n")
    if err:
        sys.stderr.write(err)
    return code
