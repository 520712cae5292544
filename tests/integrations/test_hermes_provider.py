"""The Hermes memory provider (app/integrations/hermes_provider.py) against the live server
on the real stores, called the way Hermes's MemoryManager calls it: ``initialize`` once,
``prefetch(query)`` before a turn (from a worker thread), ``sync_turn`` after it with the
OpenAI-style ``messages``. Its conformance to Hermes's own base class and loader is
tests/integrations/test_hermes_plugin.py (opt-in)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ctxgate_client import AsyncCtxgateClient, Message, NotFoundError, ToolCall, ToolResult
from ctxgate_client.models import EventRecord

from app.integrations.hermes_provider import NAME, CtxgateMemory, turn_events
from tests.integrations.conftest import CONSTRAINT, FACT, GOAL, World
from tests.unit.test_integrations_doc import DOC, ENV, blocks, parse

PLUGIN = Path(__file__).resolve().parents[2] / "clients" / "hermes-plugin" / "ctxgate"

QUERY = "why does the refund call time out?"
ANSWER = "It times out after 30 seconds; retry with the idempotency key."
GREP_OUT = "RetryConfig.java:12 maxAttempts=3 timeoutMs=30000"
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "an earlier turn"},
    {"role": "assistant", "content": "an earlier answer"},
    {"role": "user", "content": QUERY},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "search_files", "arguments": '{"pattern": "RetryConfig"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": GREP_OUT},
    {"role": "assistant", "content": ANSWER},
]


def provider(world: World, session: str, agent_context: str = "primary", **env: str
             ) -> CtxgateMemory:
    p = CtxgateMemory(world.env(world.a, **env))
    p.initialize(session, platform="cli", hermes_home="/tmp/hermes-home",
                 agent_context=agent_context)
    return p


async def events(world: World, session: str) -> list[EventRecord]:
    async with AsyncCtxgateClient(world.url, world.a.key) as ctx:
        return (await ctx.list_events(session, user_id=world.a.user)).events


def test_turn_events_in_order() -> None:
    got = turn_events(QUERY, ANSWER, MESSAGES)
    assert got == [Message(role="user", content=QUERY),
                   Message(role="assistant", content="Let me look."),
                   ToolCall(call_id="call_1", name="search_files",
                            arguments={"pattern": "RetryConfig"}),
                   ToolResult(call_id="call_1", content=GREP_OUT),
                   Message(role="assistant", content=ANSWER)]
    assert turn_events("q", "a", None) == [Message(role="user", content="q"),
                                           Message(role="assistant", content="a")]
    odd: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "function": {"name": "f", "arguments": "not json"}},
            {"function": {"name": "no id"}}]},
        {"role": "tool", "content": [{"type": "text", "text": "r"}], "tool_call_id": "c"}]
    assert turn_events("q", "a", odd)[1:3] == [
        ToolCall(call_id="c", name="f", arguments="not json"), ToolResult(call_id="c", content="r")]


def test_unconfigured_is_unavailable_and_silent() -> None:
    p = CtxgateMemory({"CTXGATE_URL": "http://127.0.0.1:9"})
    assert p.name == "ctxgate" and not p.is_available() and p.get_tool_schemas() == []
    p.initialize("s")
    assert p.prefetch(QUERY) == ""
    p.sync_turn(QUERY, ANSWER)  # nothing to send to, nothing raised


async def test_prefetch_brings_knowledge_and_task_state(world: World) -> None:
    p = provider(world, f"hermes-{uuid.uuid4()}")
    assert p.is_available()
    text = await asyncio.to_thread(p.prefetch, QUERY)
    p.shutdown()
    assert FACT in text and GOAL in text and CONSTRAINT in text
    assert len(text) <= 6000  # what Hermes keeps whole of a provider's context


async def test_sync_turn_appends_and_the_session_finds_it(world: World) -> None:
    session = f"hermes:{uuid.uuid4()}"
    p = provider(world, session)
    await asyncio.to_thread(p.sync_turn, QUERY, ANSWER, messages=MESSAGES)
    got = await events(world, session)
    assert [(e.type, e.content if e.type == "message" else None) for e in got] == [
        ("message", QUERY), ("message", "Let me look."), ("tool_call", None),
        ("tool_result", None), ("message", ANSWER)]
    async with AsyncCtxgateClient(world.url, world.a.key) as ctx:
        hits = await ctx.search_sessions(session, user_id=world.a.user, query="maxAttempts")
    assert any(h.session_id == session and "maxAttempts" in h.content for h in hits.hits)
    # the next turn, in the same session, still assembles
    assert FACT in await asyncio.to_thread(p.prefetch, "and the retry count?")
    p.shutdown()


async def test_session_switch_and_secondary_agents(world: World) -> None:
    first, second = f"hermes-{uuid.uuid4()}", f"hermes-{uuid.uuid4()}"
    p = provider(world, first)
    p.on_session_switch(second, parent_session_id=first, reset=True)
    await asyncio.to_thread(p.sync_turn, "q", "a")
    assert [e.content for e in await events(world, second)] == ["q", "a"]
    cron = f"hermes-{uuid.uuid4()}"
    c = provider(world, cron, agent_context="cron")
    await asyncio.to_thread(c.sync_turn, "q", "a")
    p.shutdown()
    c.shutdown()
    with pytest.raises(NotFoundError):  # a cron agent's turn never made the session
        await events(world, cron)


async def test_server_down_is_empty_and_quick(world: World) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nobody listens there now
    p = provider(world, f"hermes-{uuid.uuid4()}", CTXGATE_URL=f"http://127.0.0.1:{port}")
    start = time.monotonic()
    assert await asyncio.to_thread(p.prefetch, QUERY) == ""
    await asyncio.to_thread(p.sync_turn, QUERY, ANSWER, messages=MESSAGES)
    p.shutdown()
    assert time.monotonic() - start < 2.0


async def test_refusal_is_empty(world: World) -> None:
    p = provider(world, f"hermes-{uuid.uuid4()}", CTXGATE_API_KEY="ck_not_a_key")
    assert await asyncio.to_thread(p.prefetch, QUERY) == ""
    p.shutdown()


def test_docs_setup_names_this_plugin_with_the_documented_env() -> None:
    """docs/integrations.md's Hermes memory setup: the provider Hermes is told to load is
    the plugin directory copied, under the provider's name, and its .env sets exactly the
    variables of `ctxgate mcp`, which make the provider available."""
    assert parse("hermes-memory") == {"memory": {"provider": NAME}}
    assert PLUGIN.name == NAME and (PLUGIN / "__init__.py").is_file()
    text = DOC.read_text(encoding="utf-8")
    assert f"cp -r {PLUGIN.relative_to(DOC.parents[1]).as_posix()} ~/.hermes/plugins/" in text
    env = dict(line.split("=", 1) for line in blocks()["hermes-env"][1].splitlines())
    assert set(env) == ENV
    assert CtxgateMemory(env).is_available()
