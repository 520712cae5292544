"""Structural validators of the two request shapes an envelope is rendered for.

``anthropic_problems(system, messages)`` checks the Anthropic Messages API request shape,
``openai_problems(messages)`` the OpenAI Chat Completions one; each returns the list of rule
violations (empty: valid), so a test can assert on the exact rule. ``assert_anthropic`` and
``assert_openai`` fail with that list. Rules (docs cited in app/core/render/anthropic.py):

Anthropic — ``system`` a list of text blocks (no system role in messages); messages non-empty,
roles only user/assistant, first user, strictly alternating; content a string or a non-empty
list of known blocks with only their documented keys; no empty or whitespace-only text;
``tool_use`` (assistant only) with an id matching ``^[a-zA-Z0-9_-]+$``, unique in the request,
and an object ``input``; every ``tool_use`` answered by a ``tool_result`` in the next message,
which is a user message whose ``tool_result`` blocks all come first; no ``tool_result``
without its ``tool_use`` in the message before; ``cache_control`` only ``{"type":
"ephemeral"}`` (optional ttl), only on text/tool_use/tool_result blocks with content, at most 4.

OpenAI — roles system/developer/user/assistant/tool; no system or developer message after the
first other one; only the documented keys; user/system content a string; an assistant message
has content or tool_calls; each tool call ``{"id", "type": "function", "function": {"name",
"arguments": str}}`` with an id of at most 40 characters; every assistant ``tool_calls`` message
followed directly by one ``tool`` message per call id, and no ``tool`` message anywhere else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_BREAKPOINTS = 4
_BLOCK_KEYS = {
    "text": {"type", "text", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
}
_ROLE_BLOCKS = {"user": {"text", "tool_result"}, "assistant": {"text", "tool_use"}}


def _json_problems(value: Any) -> list[str]:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        return [f"not JSON: {e}"]
    return []


def _cache_problems(where: str, block: dict[str, Any]) -> list[str]:
    cc = block.get("cache_control")
    if cc is None:
        return []
    if not isinstance(cc, dict) or cc.get("type") != "ephemeral" or \
            set(cc) - {"type", "ttl"} or cc.get("ttl", "5m") not in ("5m", "1h"):
        return [f"{where}: bad cache_control {cc!r}"]
    return []


def _text_problems(where: str, block: dict[str, Any]) -> list[str]:
    text = block.get("text")
    if not isinstance(text, str) or not text.strip():
        return [f"{where}: text must be non-whitespace text"]
    return []


def _block_problems(where: str, role: str, block: Any, ids: set[str]) -> list[str]:
    if not isinstance(block, dict) or block.get("type") not in _ROLE_BLOCKS[role]:
        return [f"{where}: block not allowed for {role}: {block!r:.80}"]
    kind = block["type"]
    out = [f"{where}: unknown keys {sorted(set(block) - _BLOCK_KEYS[kind])}"] \
        if set(block) - _BLOCK_KEYS[kind] else []
    out += _cache_problems(where, block)
    if kind == "text":
        out += _text_problems(where, block)
    elif kind == "tool_use":
        bid = block.get("id")
        if not isinstance(bid, str) or not ANTHROPIC_ID.fullmatch(bid):
            out.append(f"{where}: tool_use id {bid!r} does not match ^[a-zA-Z0-9_-]+$")
        elif bid in ids:
            out.append(f"{where}: tool_use id {bid!r} is not unique")
        else:
            ids.add(bid)
        if not isinstance(block.get("name"), str) or not TOOL_NAME.fullmatch(block["name"]):
            out.append(f"{where}: bad tool name {block.get('name')!r}")
        if not isinstance(block.get("input"), dict):
            out.append(f"{where}: tool_use input must be an object")
    else:
        content = block.get("content")
        if not isinstance(block.get("tool_use_id"), str):
            out.append(f"{where}: tool_result without tool_use_id")
        if content is not None and not isinstance(content, str):
            if not isinstance(content, list):
                out.append(f"{where}: tool_result content must be a string or blocks")
            else:
                for j, sub in enumerate(content):
                    if not isinstance(sub, dict) or sub.get("type") != "text":
                        out.append(f"{where}.content.{j}: only text blocks here")
                    else:
                        out += _text_problems(f"{where}.content.{j}", sub)
        if not isinstance(block.get("is_error", False), bool):
            out.append(f"{where}: is_error must be a boolean")
    return out


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _pairing_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for i, m in enumerate(messages):
        blocks = [b for b in _blocks(m) if isinstance(b, dict)]
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if results:
            first_other = next((j for j, b in enumerate(blocks) if b.get("type") != "tool_result"),
                               len(blocks))
            if any(b.get("type") == "tool_result" for b in blocks[first_other:]):
                out.append(f"messages.{i}: tool_result blocks must come first")
            prev = messages[i - 1] if i > 0 else {}
            called = {b.get("id") for b in _blocks(prev)
                      if isinstance(b, dict) and b.get("type") == "tool_use"}
            stray = [r for r in results if r not in called]
            if stray:
                out.append(f"messages.{i}: tool_result without its tool_use before: {stray}")
            if len(set(results)) != len(results):
                out.append(f"messages.{i}: a tool_use answered twice")
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else {}
            answered = {b.get("tool_use_id") for b in _blocks(nxt)
                        if isinstance(b, dict) and b.get("type") == "tool_result"}
            missing = [u for u in uses if u not in answered]
            if missing:
                out.append(f"messages.{i}: tool_use ids without tool_result blocks immediately "
                           f"after: {missing}")
    return out


def _system_problems(system: list[Any]) -> list[str]:
    out: list[str] = []
    for i, block in enumerate(system):
        where = f"system.{i}"
        if not isinstance(block, dict) or block.get("type") != "text" or \
                set(block) - _BLOCK_KEYS["text"]:
            out.append(f"{where}: system holds only text blocks")
        else:
            out += _text_problems(where, block) + _cache_problems(where, block)
    return out


def anthropic_problems(system: Any, messages: Any) -> list[str]:
    out = _json_problems({"system": system, "messages": messages})
    if not isinstance(system, list):
        return [*out, "system must be a list of text blocks"]
    out += _system_problems(system)
    breakpoints = sum(isinstance(b, dict) and "cache_control" in b for b in system)
    if not isinstance(messages, list) or not messages:
        return [*out, "messages must be a non-empty list"]
    ids: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            out.append(f"{where}: a message is exactly {{role, content}}")
            continue
        if m["role"] not in _ROLE_BLOCKS:
            out.append(f"{where}: role {m['role']!r} (only user and assistant)")
            continue
        if i == 0 and m["role"] != "user":
            out.append('messages: first message must use the "user" role')
        if i > 0 and isinstance(messages[i - 1], dict) and messages[i - 1].get("role") == m["role"]:
            out.append(f"{where}: roles must alternate")
        content = m["content"]
        if isinstance(content, str):
            out += _text_problems(where, {"text": content})
            continue
        if not isinstance(content, list) or not content:
            out.append(f"{where}: content must be a string or a non-empty list")
            continue
        for j, block in enumerate(content):
            out += _block_problems(f"{where}.content.{j}", m["role"], block, ids)
            breakpoints += isinstance(block, dict) and "cache_control" in block
    if breakpoints > MAX_BREAKPOINTS:
        out.append(f"{breakpoints} cache_control breakpoints (at most {MAX_BREAKPOINTS})")
    return out + _pairing_problems([m for m in messages if isinstance(m, dict)])


_OPENAI_KEYS = {
    "system": {"role", "content", "name"}, "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"}, "assistant": {"role", "content", "name", "tool_calls"},
    "tool": {"role", "content", "tool_call_id"},
}


def _openai_message_problems(where: str, m: dict[str, Any]) -> list[str]:
    role = m["role"]
    out = [f"{where}: unknown keys {sorted(set(m) - _OPENAI_KEYS[role])}"] \
        if set(m) - _OPENAI_KEYS[role] else []
    if role != "assistant" and not isinstance(m.get("content"), str):
        out.append(f"{where}: {role} content must be a string")
    if role == "assistant":
        calls = m.get("tool_calls")
        if m.get("content") is None and not calls:
            out.append(f"{where}: an assistant message needs content or tool_calls")
        for j, c in enumerate(calls or []):
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(c, dict) or set(c) != {"id", "type", "function"} or \
                    c["type"] != "function" or not isinstance(fn, dict) or \
                    set(fn) != {"name", "arguments"} or not isinstance(fn["arguments"], str) or \
                    not TOOL_NAME.fullmatch(str(fn["name"])):
                out.append(f"{where}.tool_calls.{j}: bad tool call {c!r:.80}")
            elif not isinstance(c["id"], str) or not 0 < len(c["id"]) <= 40:
                out.append(f"{where}.tool_calls.{j}: id must be 1..40 characters")
    return out


def openai_problems(messages: Any) -> list[str]:
    out = _json_problems(messages)
    if not isinstance(messages, list):
        return [*out, "messages must be a list"]
    seen_other = False
    expecting: set[str] = set()  # tool_call ids still owed a tool message
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in _OPENAI_KEYS:
            out.append(f"{where}: unknown message {m!r:.80}")
            continue
        role = m["role"]
        out += _openai_message_problems(where, m)
        if role in ("system", "developer"):
            if seen_other:
                out.append(f"{where}: {role} message after the conversation began")
        else:
            seen_other = True
        if role == "tool":
            if m.get("tool_call_id") not in expecting:
                out.append(f"{where}: tool message not answering the assistant right before")
            expecting.discard(m.get("tool_call_id"))
            continue
        if expecting:
            out.append(f"{where}: tool_calls {sorted(expecting)} have no tool message")
        expecting = {str(c.get("id")) for c in m.get("tool_calls") or [] if isinstance(c, dict)}
    if expecting:
        out.append(f"end: tool_calls {sorted(expecting)} have no tool message")
    return out


def assert_anthropic(system: Any, messages: Any) -> None:
    problems = anthropic_problems(system, messages)
    assert not problems, problems


def assert_openai(messages: Any) -> None:
    problems = openai_problems(messages)
    assert not problems, problems
