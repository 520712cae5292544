"""``ctxgate hook claude-code`` as Claude Code runs it: a subprocess with an event's payload
(tests/data/claude_code, the shapes of the hooks reference) on stdin, against the live server
on the real stores. Each test gives the payload a session of its own."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ctxgate_client import AsyncCtxgateClient, Message, NotFoundError
from ctxgate_client.models import EventRecord

from app.integrations.claude_code_hook import last_assistant_text
from tests.integrations.conftest import CONSTRAINT, FACT, GOAL, PYTHON, World

DATA = Path(__file__).resolve().parents[1] / "data" / "claude_code"
HOOK = [PYTHON, "-m", "app.cli", "hook", "claude-code"]
STARTUP_S = 5.0  # the interpreter and imports, on a busy two-core machine


def payload(name: str, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    doc["session_id"] = f"cc-{uuid.uuid4()}"
    doc.update(changes)
    return doc


async def hook(world: World, stdin: dict[str, Any] | bytes, **env: str
               ) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the hook for tenant A's user, the conftest environment updated by ``env``."""
    raw = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    start = time.monotonic()
    done = await asyncio.to_thread(
        subprocess.run, HOOK, input=raw.decode(errors="replace"), capture_output=True,
        text=True, timeout=60, env=world.env(world.a, **env))
    return done, time.monotonic() - start


async def events(world: World, session: str) -> list[EventRecord]:
    """Tenant A's user's events of ``session`` (none when it does not exist)."""
    async with AsyncCtxgateClient(world.url, world.a.key) as ctx:
        try:
            return (await ctx.list_events(session, user_id=world.a.user)).events
        except NotFoundError:
            return []


def context_of(done: subprocess.CompletedProcess[str], event: str) -> str:
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    text: str = out["hookSpecificOutput"]["additionalContext"]
    return text


async def test_user_prompt_submit_appends_the_prompt_and_prints_the_context(
        world: World) -> None:
    p = payload("user_prompt_submit")
    done, _ = await hook(world, p)
    context = context_of(done, "UserPromptSubmit")
    assert FACT in context  # the knowledge, as ingested
    assert GOAL in context and CONSTRAINT in context and "SRE sign-off" in context
    assert p["prompt"] not in context  # neither the query nor the history is repeated
    assert len(context) < 10_000  # what Claude Code keeps whole
    (prompt,) = await events(world, p["session_id"])
    assert (prompt.type, prompt.role, prompt.content) == ("message", "user", p["prompt"])


async def test_session_start_prints_the_context_for_the_task(world: World) -> None:
    p = payload("session_start")
    context = context_of((await hook(world, p))[0], "SessionStart")
    assert GOAL in context and FACT in context  # the goal is the query: the runbook matches
    assert await events(world, p["session_id"]) == []  # nothing to append at a start


async def test_post_tool_use_appends_the_call_and_its_result(world: World) -> None:
    p = payload("post_tool_use")
    done, _ = await hook(world, p)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    call, result = await events(world, p["session_id"])
    assert (call.type, call.call_id, call.name) == ("tool_call", p["tool_use_id"], "Bash")
    assert call.arguments == p["tool_input"]
    assert (result.type, result.call_id, result.is_error) == ("tool_result", call.call_id,
                                                              False)
    assert "int maxAttempts = 3;" in result.content

    failed = payload("post_tool_use_failure", session_id=p["session_id"])
    assert (await hook(world, failed))[0].returncode == 0
    *_, call, result = await events(world, p["session_id"])
    assert call.call_id == result.call_id == failed["tool_use_id"]
    assert result.is_error and "FAILED" in result.content


async def test_without_tool_use_id_the_call_id_is_derived_from_the_payload(
        world: World) -> None:
    p = payload("post_tool_use")
    del p["tool_use_id"]
    for _ in range(2):
        assert (await hook(world, p))[0].returncode == 0
    ids = {e.call_id for e in await events(world, p["session_id"])}
    (only,) = ids
    assert only is not None and only.startswith("cc_")


async def test_pre_compact_compacts_and_commits_into_the_task(world: World) -> None:
    p = payload("pre_compact")
    session, task = p["session_id"], f"task-{uuid.uuid4().hex[:8]}"
    async with AsyncCtxgateClient(world.url, world.a.key) as ctx:
        await ctx.put_checkpoint(task, user_id=world.a.user, session_id=session, goal=GOAL)
        await ctx.append_events(session, user_id=world.a.user, events=[
            Message(role="user" if i % 2 == 0 else "assistant",
                    content=f"step {i}: we looked at the refund retry settings once more, "
                            f"and decided to keep the thirty second cap for now. " * 3)
            for i in range(24)])
        done, _ = await hook(world, p, CTXGATE_TASK_ID=task, CTXGATE_BUDGET_TOKENS="300")
        assert (done.returncode, done.stderr) == (0, "")
        turn = await ctx.assemble_context(user_id=world.a.user, session_id=session,
                                          task_id=task, query="the refund cap", budget=300)
        checkpoint = await ctx.get_checkpoint(task, user_id=world.a.user)
    compaction = getattr(turn.manifest, "compaction", None)
    assert compaction is not None, turn.manifest
    assert compaction["trigger"] == "manual" and compaction["type"] == "compaction.completed"
    assert compaction["checkpoint_revision_after"] == checkpoint.revision


async def test_stop_appends_the_last_assistant_message(world: World) -> None:
    p = payload("stop", transcript_path=str(DATA / "transcript.jsonl"))
    done, _ = await hook(world, p)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    (said,) = await events(world, p["session_id"])
    assert (said.role, said.content) == (
        "assistant", "Refund calls time out because RetryConfig caps them at three attempts "
                     "of ten seconds: 30 s in all.")
    # Newer versions send the message itself; it wins over the transcript.
    newer = payload("stop", transcript_path=str(DATA / "transcript.jsonl"),
                    last_assistant_message="Done: the cap is now configurable.")
    assert (await hook(world, newer))[0].returncode == 0
    assert [e.content for e in await events(world, newer["session_id"])] == [
        "Done: the cap is now configurable."]
    # No transcript and no message: nothing to append, and no error.
    gone = payload("stop", transcript_path="/nonexistent/t.jsonl")
    assert (await hook(world, gone))[0].returncode == 0
    assert await events(world, gone["session_id"]) == []


@pytest.mark.parametrize(("stdin", "says"), [
    (b"this is not json", "not JSON"),
    (b"", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({"hook_event_name": "PreToolUse", "session_id": "s"}).encode(),
     "unknown hook event 'PreToolUse'"),
    (json.dumps({"session_id": "s", "prompt": "hi"}).encode(), "unknown hook event None"),
    (json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s"}).encode(),
     "prompt: Field required"),
    (json.dumps({"hook_event_name": "PostToolUse", "session_id": "s",
                 "tool_name": 7}).encode(), "tool_name"),
])
async def test_bad_input_is_a_non_blocking_error_that_says_why(
        world: World, stdin: bytes, says: str) -> None:
    done, _ = await hook(world, stdin)
    assert done.returncode == 1 and done.stdout == ""
    assert says in done.stderr and "continuing without ctxgate" in done.stderr
    assert await events(world, "s") == []  # nothing half-written


async def test_a_bad_configuration_is_a_non_blocking_error(world: World) -> None:
    p = payload("user_prompt_submit")
    for env, says in (({"CTXGATE_USER_ID": ""}, "CTXGATE_USER_ID is not set"),
                      ({"CTXGATE_API_KEY": ""}, "CTXGATE_API_KEY is not set"),
                      ({"CTXGATE_BUDGET_TOKENS": "300.5"}, "a whole number"),
                      ({"CTXGATE_BUDGET_TOKENS": "1e9"}, "between 256 and 2000000"),
                      ({"CTXGATE_DATA_LEVEL": "top"}, "CTXGATE_DATA_LEVEL must be one of"),
                      ({"CTXGATE_HOOK_TIMEOUT_S": "soon"}, "CTXGATE_HOOK_TIMEOUT_S"),
                      ({"CTXGATE_API_KEY": "wrong"}, "refused: Unauthorized (unauthorized)")):
        done, _ = await hook(world, p, **env)
        assert (done.returncode, done.stdout) == (1, ""), env
        assert says in done.stderr, done.stderr
    assert await events(world, p["session_id"]) == []


async def test_server_down_is_a_non_blocking_error_within_the_deadline(world: World) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done, took = await hook(world, payload("user_prompt_submit"),
                            CTXGATE_URL=f"http://127.0.0.1:{port}")
    assert (done.returncode, done.stdout) == (1, "")
    assert "could not be reached" in done.stderr
    assert took < 5 + STARTUP_S


async def test_a_server_that_never_answers_is_cut_off_at_the_deadline(world: World) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        done, took = await hook(world, payload("user_prompt_submit"),
                                CTXGATE_URL=f"http://127.0.0.1:{silent.getsockname()[1]}",
                                CTXGATE_HOOK_TIMEOUT_S="1")
    assert (done.returncode, done.stdout) == (1, "")
    assert "did not answer within 1 s" in done.stderr
    assert took < 1 + STARTUP_S


def test_last_assistant_text_reads_what_the_transcript_gives(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    lines = [
        {"type": "assistant", "message": {"role": "assistant", "content": "plain string"}},
        "not json at all",
        {"type": "assistant", "message": {"id": "m2", "role": "assistant", "content": [
            {"type": "text", "text": "first part"}]}},
        {"type": "assistant", "message": {"id": "m2", "role": "assistant", "content": [
            {"type": "tool_use", "id": "x", "name": "Bash", "input": {}}]}},
        {"type": "assistant", "message": {"id": "m2", "role": "assistant", "content": [
            {"type": "text", "text": "second part"}]}},
        {"type": "user", "message": {"role": "user", "content": "thanks"}},
    ]
    t.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    assert last_assistant_text(str(t)) == "first part\nsecond part"
    t.write_text(json.dumps(lines[0]))
    assert last_assistant_text(str(t)) == "plain string"
    t.write_text(json.dumps(lines[-1]))
    assert last_assistant_text(str(t)) is None
    assert last_assistant_text(str(tmp_path / "missing.jsonl")) is None
    assert last_assistant_text(None) is None
