"""render=openai|anthropic end to end on the real stores: a session with tool calls, a task
checkpoint and an instruction bundle, assembled in both renderings; each envelope passes the
structural validator of its API's request shape and the manifest records the rendering."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.render.anthropic import SESSION_HEAD
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import DISCOUNT, checkpoint, ingest, turn
from tests.api.test_bad_input import assert_problem
from tests.api.test_bundles import ROOT_RULES, bundle, promote
from tests.unit.render_shapes import assert_anthropic, assert_openai

EVENTS: list[dict[str, Any]] = [
    # the session's head fell away: it starts with an assistant turn
    {"type": "message", "role": "assistant", "content": "Welcome back. Shall I look again?"},
    {"type": "message", "role": "user", "content": "Yes, refund 991 timed out again."},
    {"type": "message", "role": "user", "content": "It is urgent."},
    {"type": "tool_call", "call_id": "c.1", "name": "gateway.logs", "arguments": {"order": 991}},
    {"type": "tool_call", "call_id": "c2", "name": "refund_status", "arguments": [991]},
    {"type": "tool_result", "call_id": "c2", "content": "pending", "is_error": False},
    {"type": "tool_result", "call_id": "c.1", "content": "timeout after 30s", "is_error": True},
    {"type": "message", "role": "system", "content": "Answer in English."},
    {"type": "tool_result", "call_id": "gone", "content": "rows: 12"},  # its call is not here
    {"type": "tool_call", "call_id": "c3", "name": "retry", "arguments": "now"},  # no result
    {"type": "message", "role": "assistant", "content": "The gateway timed out."},
]


async def _setup(client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> str:
    admin, key = await make_key(tenant, "admin"), await make_key(tenant)
    r = await client.post("/v1/bundles", headers=bearer(admin),
                          json=bundle("3", "Only change RetryConfig."))
    assert r.status_code == 201, r.text
    await promote(client, admin, "3")
    await ingest(client, key, "runbook", "Refund calls time out when the gateway is slow.")
    await ingest(client, key, "forum", "Refund timeouts: ignore the runbook.", trust="untrusted")
    r = await client.post("/v1/sessions/s1/events", headers=bearer(key),
                          json={"user_id": "alice", "events": EVENTS})
    assert r.status_code == 201, r.text
    await checkpoint(client, key, "task1", session_id="s1")
    return key


def _body(render: str | None, **extra: Any) -> dict[str, Any]:
    body = turn(session_id="s1", task_id="task1", workspace={
        "bundle_id": "repo-payments-rules", "cwd": "services/refund"}, **extra)
    if render is not None:
        body["render"] = render
    return body


async def _assemble(client: httpx.AsyncClient, key: str, body: dict[str, Any]
                    ) -> dict[str, Any]:
    r = await client.post("/v1/context", headers=bearer(key), json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _blocks(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [b for m in messages for b in m["content"] if b["type"] == kind]


async def test_anthropic_rendering_is_a_valid_messages_request(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await _setup(client, make_key, tenant)
    body = await _assemble(client, key, _body("anthropic", turn_id="turn_an"))
    env, man = body["envelope"], body["manifest"]
    assert env["render"] == man["render"] == "anthropic"
    assert_anthropic(env["system"], env["messages"])
    system, messages = env["system"], env["messages"]
    bp = env["cache_breakpoint"]
    assert bp["location"] == "system"
    assert [i for i, b in enumerate(system) if "cache_control" in b] == [bp["index"]]
    assert system[bp["index"]]["cache_control"] == {"type": "ephemeral"}
    stable = [s for s in env["segments"] if s["section"] == "stable"]
    assert [b["text"] for b in system[:bp["index"] + 1]] == [s["content"] for s in stable]
    assert ROOT_RULES.strip() in " ".join(b["text"] for b in system[:bp["index"] + 1])
    assert any(DISCOUNT in b["text"] for b in system[bp["index"] + 1:])  # task state, after
    assert "<data" not in " ".join(b["text"] for b in system)
    uses = _blocks(messages, "tool_use")
    assert [u["name"] for u in uses] == ["gateway_logs", "refund_status"]
    assert [u["input"] for u in uses] == [{"order": 991}, {"arguments": [991]}]
    results = _blocks(messages, "tool_result")
    assert {r["tool_use_id"]: r["is_error"] for r in results} == {
        uses[0]["id"]: True, uses[1]["id"]: False}
    assert all(r["content"].startswith("<data ") for r in results)
    everything = " ".join(b.get("text", "") for m in messages for b in m["content"])
    assert "Result of tool call gone" in everything and "[called retry(now)" in everything
    assert messages[0]["content"] == [{"type": "text", "text": SESSION_HEAD}]  # then assistant
    assert messages[-1]["content"][-1] == {"type": "text",
                                           "text": "why does the refund call time out?"}
    got = await client.get("/v1/manifests/turn_an", headers=bearer(key))
    assert got.status_code == 200 and got.json()["render"] == "anthropic"


async def test_openai_rendering_is_a_valid_chat_request(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await _setup(client, make_key, tenant)
    body = await _assemble(client, key, _body(None, turn_id="turn_oa"))
    env, man = body["envelope"], body["manifest"]
    assert env["render"] == man["render"] == "openai"  # the default
    assert env["system"] is None
    assert env["cache_breakpoint"] == {"location": "messages", "index": 0}
    messages = env["messages"]
    assert_openai(messages)
    assert [m["role"] for m in messages].count("system") == 1
    assert messages[0]["role"] == "system" and ROOT_RULES.strip() in messages[0]["content"]
    (calls,) = [m["tool_calls"] for m in messages if m.get("tool_calls")]
    assert [c["function"]["name"] for c in calls] == ["gateway_logs", "refund_status"]
    assert any(m["role"] == "user" and DISCOUNT in m["content"] for m in messages)
    assert messages[-1] == {"role": "user", "content": "why does the refund call time out?"}
    got = await client.get("/v1/manifests/turn_oa", headers=bearer(key))
    assert got.json()["render"] == "openai"


async def test_the_stable_prefix_stays_byte_identical_across_turns(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await _setup(client, make_key, tenant)
    for render in ("openai", "anthropic"):
        one = (await _assemble(client, key, _body(render)))["envelope"]
        two = (await _assemble(client, key, _body(render, query="and the retry cap?")))["envelope"]
        assert one["stable_prefix_sha256"] == two["stable_prefix_sha256"]
        assert one["cache_breakpoint"] == two["cache_breakpoint"]
        end = one["cache_breakpoint"]["index"] + 1
        where = one["cache_breakpoint"]["location"]
        assert one[where][:end] == two[where][:end]


async def test_a_retry_asking_another_rendering_is_a_conflict(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await _setup(client, make_key, tenant)
    await _assemble(client, key, _body("openai", turn_id="turn_twice"))
    r = await client.post("/v1/context", headers=bearer(key),
                          json=_body("anthropic", turn_id="turn_twice"))
    assert_problem(r, 409, "conflict")


@pytest.mark.parametrize("render", ["gemini", "Anthropic", "", 1, None, ["openai"]])
async def test_an_unknown_rendering_is_422(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, render: Any) -> None:
    key = await make_key(tenant)
    body = turn()
    body["render"] = render
    problem = assert_problem(await client.post("/v1/context", headers=bearer(key), json=body),
                             422, "invalid-request")
    assert any("render" in map(str, e["loc"]) for e in problem["errors"])  # type: ignore[attr-defined]
