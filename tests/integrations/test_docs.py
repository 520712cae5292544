"""The Claude Code hooks snippet of docs/integrations.md runs `ctxgate hook claude-code` for
exactly the events the hook handles, with keys Claude Code reads (its hooks reference:
https://code.claude.com/docs/en/hooks) and the variables the hook reads; the HTTP MCP
snippets name the end user as /mcp requires."""

from __future__ import annotations

from app.integrations.claude_code_hook import EVENTS
from app.integrations.config import DEFAULT_HOOK_TIMEOUT_S
from tests.unit.test_integrations_doc import ENV, parse, server

HANDLER_KEYS = {"type", "command", "timeout"}
TOOL_EVENTS = {"PostToolUse", "PostToolUseFailure"}  # the events that take a matcher


def test_hooks_snippet_runs_the_hook_for_every_handled_event() -> None:
    doc = parse("claude-code-hooks")
    assert set(doc) == {"env", "hooks"}
    assert set(doc["env"]) == ENV - {"CTXGATE_API_KEY"}  # the key stays out of the file
    assert set(doc["hooks"]) == set(EVENTS)
    for event, groups in doc["hooks"].items():
        (group,) = groups
        assert set(group) == ({"matcher", "hooks"} if event in TOOL_EVENTS else {"hooks"})
        (handler,) = group["hooks"]
        assert set(handler) == HANDLER_KEYS
        assert (handler["type"], handler["command"]) == ("command", "ctxgate hook claude-code")
        assert handler["timeout"] > DEFAULT_HOOK_TIMEOUT_S  # our deadline comes first


def test_http_snippets_name_the_end_user() -> None:
    for tag in ("claude-code-http", "openclaw-http", "hermes-http"):
        assert server(tag)["headers"]["X-Ctxgate-User"], tag
    assert server("codex-http")["http_headers"]["X-Ctxgate-User"]
