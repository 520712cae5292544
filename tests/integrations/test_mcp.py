"""The MCP server driven by the SDK's own client, on the real stores: over stdio
(`python -m app.cli mcp` launched by ``stdio_client``) and over streamable HTTP at /mcp of
the live server, both eras of the protocol (the 2026 per-request one the client probes
first, and the initialize handshake that runtimes speak today)."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.integrations.conftest import CONSTRAINT, GOAL, PYTHON, Tenant, World

TOOLS = {"assemble_context", "append_events", "search_sessions", "recall_memories",
         "propose_memory", "get_checkpoint", "put_checkpoint"}


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@asynccontextmanager
async def over_stdio(world: World, who: Tenant) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=PYTHON, args=["-m", "app.cli", "mcp"],
                                   env=world.env(who))
    async with Client(params) as client:
        yield client


@asynccontextmanager
async def over_http(world: World, who: Tenant, *, mode: str = "auto",
                    headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    sent = {"Authorization": f"Bearer {who.key}", "X-Ctxgate-User": who.user,
            "X-Ctxgate-Domain": "payments"} if headers is None else headers
    async with httpx2.AsyncClient(headers=sent, timeout=60) as http, \
            Client(streamable_http_client(f"{world.url}/mcp", http_client=http),
                   mode=mode) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool(tool, arguments)


async def scenario(client: Client, world: World, who: Tenant) -> None:
    """The tools end to end: list, assemble (knowledge + task state), append then search,
    memories, checkpoints, and the two kinds of error."""
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} >= TOOLS
    schema = next(t for t in listed.tools if t.name == "assemble_context").input_schema
    assert schema["required"] == ["query"] and "append_events" in schema["properties"]

    session = f"s-{uuid.uuid4().hex[:8]}"
    turn = await call(client, "assemble_context", query="why do refund calls time out?",
                      session_id=session, task_id=who.task,
                      append_events=[{"type": "message", "role": "user",
                                      "content": "why do refund calls time out?"}])
    assert not turn.is_error, text(turn)
    body = text(turn)
    assert "RFD-7731" in body  # the knowledge
    assert GOAL in body and CONSTRAINT in body  # the task state
    assert turn.structured_content is not None
    turn_id = turn.structured_content["turn_id"]
    assert f"turn_id: {turn_id}" in body and turn.structured_content["appended_seqs"]

    appended = await call(client, "append_events", session_id=session, events=[
        {"type": "tool_call", "call_id": "c1", "name": "grep", "arguments": {"q": "x"}},
        {"type": "tool_result", "call_id": "c1", "content": "zanzibar quokka 42"}])
    assert not appended.is_error, text(appended)
    found = await call(client, "search_sessions", session_id=session, query="quokka")
    assert not found.is_error and "zanzibar quokka 42" in text(found)
    assert '<data ref="session:' in text(found)  # transcript hits are fenced as data

    preference = f"Alice prefers tabs over spaces in project {session}"
    memory = await call(client, "propose_memory", statement=preference, session_id=session,
                        origin="user_stated", key=f"indent-{session}")
    assert not memory.is_error and text(memory).startswith("accepted"), text(memory)
    recalled = await call(client, "recall_memories")
    assert preference in text(recalled)
    team = await call(client, "propose_memory", statement=f"Deploys of {session} need two "
                      "approvals", session_id=session, origin="team_decision", scope="team")
    assert not team.is_error and text(team).startswith("pending"), text(team)
    assert not (await call(client, "recall_memories", scope="team")).is_error

    sub = f"{who.task}-{session}"
    saved = await call(client, "put_checkpoint", task_id=sub, goal="Write a test",
                       open_questions=["which gateway?"])
    assert not saved.is_error and "revision 1" in text(saved), text(saved)
    read = await call(client, "get_checkpoint", task_id=sub)
    assert read.structured_content is not None
    assert read.structured_content["open_questions"] == ["which gateway?"]

    # Wrong-typed and missing arguments: the SDK refuses them before the tool runs.
    # Nothing of a refused call is written, not even its valid events.
    walrus = {"type": "message", "role": "user", "content": "walrus"}
    for bad in ({"session_id": session, "events": "not a list"},
                {"session_id": session, "events": [walrus, {"type": "message", "role": "user"}]},
                {"session_id": session, "events": [walrus, {**walrus, "extra": 1}]},
                {"session_id": 42, "events": [walrus]},
                {"events": [walrus]}):
        refused = await call(client, "append_events", **bad)
        assert refused.is_error, bad
    nothing = await call(client, "search_sessions", session_id=session, query="walrus")
    assert not nothing.is_error and text(nothing) == "no matching events"
    wrong = await call(client, "assemble_context", query="q", budget_tokens="lots")
    assert wrong.is_error
    # A ctxgate problem+json is a tool error carrying its type, title and detail.
    missing = await call(client, "get_checkpoint", task_id="no-such-task")
    assert missing.is_error and missing.structured_content is not None
    assert missing.structured_content["type"] == "not-found"
    assert "not-found" in text(missing)


async def test_stdio(world: World) -> None:
    async with over_stdio(world, world.a) as client:
        await scenario(client, world, world.a)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http(world: World, mode: str) -> None:
    async with over_http(world, world.a, mode=mode) as client:
        await scenario(client, world, world.a)


async def test_stdio_refuses_to_start_without_its_configuration(world: World) -> None:
    env = {**world.env(world.a), "CTXGATE_USER_ID": ""}
    done = await asyncio.to_thread(subprocess.run, [PYTHON, "-m", "app.cli", "mcp"],
                                   input="", capture_output=True, text=True, env=env,
                                   timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "ctxgate mcp: CTXGATE_USER_ID is not set" in done.stderr


async def test_http_without_a_valid_key_is_401_problem(world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url) as http:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}):
            r = await http.post("/mcp", json=initialize, headers={**accept, **auth})
            assert r.status_code == 401, r.text
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["type"] == "unauthorized"


async def test_http_needs_the_end_user_header(world: World) -> None:
    async with over_http(world, world.a, headers={
            "Authorization": f"Bearer {world.a.key}"}) as client:
        result = await call(client, "assemble_context", query="refund")
        assert result.is_error and "X-Ctxgate-User" in text(result)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_tenant_b_sees_nothing_of_tenant_a(world: World, transport: str) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with over_http(world, world.a) as a:
        await call(a, "append_events", session_id=session, events=[
            {"type": "message", "role": "user", "content": "the secret word is pelican"}])
    # B names A's user, session and task: the key's tenant decides, and B has none of them.
    intruder = Tenant(tenant_id=world.b.tenant_id, key=world.b.key, user=world.a.user,
                      task=world.a.task)
    opened = over_stdio(world, intruder) if transport == "stdio" else \
        over_http(world, intruder)
    async with opened as b:
        turn = await call(b, "assemble_context", query="why do refund calls time out?",
                          session_id=session, task_id=world.a.task)
        assert not turn.is_error, text(turn)  # a turn of B's own: its tenant has nothing
        assert "RFD-7731" not in text(turn) and GOAL not in text(turn)
        assert "pelican" not in text(turn)
        cp = await call(b, "get_checkpoint", task_id=world.a.task)
        assert cp.is_error and cp.structured_content is not None
        assert cp.structured_content["type"] == "not-found"
        found = await call(b, "search_sessions", session_id=session, query="pelican")
        assert "pelican" not in text(found)
        recalled = await call(b, "recall_memories")
        assert "tabs over spaces" not in text(recalled)
