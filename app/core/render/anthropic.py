"""Render a ``Layout`` as an Anthropic Messages API request: top-level ``system`` + ``messages``.

Contract: ``render(layout)`` returns ``Rendered`` with

* ``system`` — a list of text blocks: one per trusted stable text, the LAST of them carrying
  ``cache_control: {"type": "ephemeral"}`` (the one breakpoint; ``cache_breakpoint`` points at
  it), then the task state after the breakpoint. Low-trust content never enters ``system``.
  Empty when there is neither (leave ``system`` out of the request then).
* ``messages`` — strictly alternating ``user``/``assistant`` messages, first ``user``, each with
  a list of content blocks (never a string, never empty): consecutive items of one role are
  merged into one message. A ``ToolRound`` is an assistant message's ``tool_use`` blocks
  (``id``, ``name``, ``input`` an object) and, as the very next message, a user message whose
  content starts with their ``tool_result`` blocks (``tool_use_id``, ``content`` fenced data,
  ``is_error``); anything the user side says after the round follows those blocks. The final
  user message ends with the reviewed references, the fenced data and the query, last.
* ``input``: the call's arguments as stored (JSON text); arguments that are not a JSON object
  (a list, a bare string, text a guard masked into invalid JSON) become
  ``{"arguments": <value>}``, because ``input`` must be an object.
* A session whose first kept item is an assistant turn (the head of the history fell to the
  budget or to compaction) gets a leading user block ``SESSION_HEAD``, which says just that:
  the API has answered an assistant-first list with 400 ``messages: first message must use
  the "user" role`` (reported by its users; the reference's examples all start with
  ``user``), and a placeholder that states a fact is safer than dropping the assistant turn,
  which may hold the answer the next turn builds on. The same block stands in when there is
  nothing else to send (a request needs at least one message).

Rules relied on (Anthropic docs, checked through the search tool):

* platform.claude.com/docs/en/api/messages: "there is no "system" role for input messages in
  the Messages API" (use the top-level ``system``, a string or a list of text blocks); "Our
  models are trained to operate on alternating user and assistant conversational turns";
  "Consecutive user or assistant turns in your request will be combined into a single turn"
  (merged here so the request is what the model sees); a final ``assistant`` message is a
  prefill, so the query is always last in a ``user`` message.
* .../agents-and-tools/tool-use/handle-tool-calls: ``input`` is "an object"; "Tool result
  blocks must immediately follow their corresponding tool use blocks in the message
  history"; "In the user message containing tool results, the tool_result blocks must come
  FIRST in the content array. Any text must come AFTER all tool results"; ``is_error`` flags
  a failed call. API errors: "Each tool_use block must have a corresponding tool_result block
  in the next message"; ``tool_use.id`` must match ``^[a-zA-Z0-9_-]+$`` (wire ids, shared).
* .../build-with-claude/prompt-caching: "Cache prefixes are created in the following order:
  tools, system, then messages"; "you can define up to 4 cache breakpoints"; "Empty text
  blocks cannot be cached"; changes at a level invalidate it and all later levels — so the
  breakpoint closes the stable blocks, before the task state, whose revisions then never
  invalidate the cached stable prefix. A prefix shorter than the model's minimum (1024 tokens
  on most models) is simply not cached, without an error.
* Whitespace-only text blocks are refused ("text content blocks must contain non-whitespace
  text"): the layout leaves them out.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.model import CacheBreakpoint
from app.core.render.shared import Call, Layout, Message, Rendered, Say, ToolRound

SESSION_HEAD = "[Earlier turns of this session are not in context.]"
EPHEMERAL = {"type": "ephemeral"}

Block = dict[str, Any]


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _input(call: Call) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        value = call.arguments
    return value if isinstance(value, dict) else {"arguments": value}


def _add(out: list[Message], role: str, blocks: list[Block]) -> None:
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _round(out: list[Message], item: ToolRound) -> None:
    _add(out, "assistant", [{"type": "tool_use", "id": c.id, "name": c.name,
                             "input": _input(c)} for c in item.calls])
    # A new user message: the assistant blocks were just added, so the results come first.
    _add(out, "user", [{"type": "tool_result", "tool_use_id": r.id, "content": r.text,
                        "is_error": r.is_error} for r in item.results])


def render(layout: Layout) -> Rendered:
    system: list[Block] = [_text(t) for t in layout.stable]
    breakpoint_ = None
    if system:
        system[-1]["cache_control"] = dict(EPHEMERAL)
        breakpoint_ = CacheBreakpoint(location="system", index=len(system) - 1)
    system += (_text(t) for t in layout.task)

    out: list[Message] = []
    for item in layout.conversation:
        if isinstance(item, Say):
            _add(out, item.role, [_text(item.text)])
        else:
            _round(out, item)
    final = [t for t in (layout.reviewed, layout.data) if t is not None]
    final += layout.query
    if final:
        _add(out, "user", [_text(t) for t in final])
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [_text(SESSION_HEAD)]})
    return Rendered(system=tuple(system), messages=tuple(out), cache_breakpoint=breakpoint_)
