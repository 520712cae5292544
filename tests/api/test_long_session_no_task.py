"""A long session without a task (the bench's probe_session_long) on the real stores: its
turn fits its budget and keeps the user's constraint verbatim (the seeds' incident 3). The bench's
events (tool results of timestamped, rule-like log lines) once made hundreds of expired found
constraints, each with a re-confirm question in the never-compressed compaction block: 422
budget-too-small at 46k tokens."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.generate import _events
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

RULE = "Never restart the primary database during business hours."
SID = "s-long-notask"


async def test_long_session_without_task_fits_its_budget(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    events: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": RULE}]
    for _seq, typ, role, content, call, name, _args, err, _at in _events(
            random.Random(4), 200, datetime(2026, 1, 1, tzinfo=UTC)):
        e: dict[str, Any] = {"type": typ} | ({} if typ == "tool_call" else {"content": content})
        if role:
            e["role"] = role
        if call:
            e["call_id"] = call
        if name:
            e |= {"name": name, "arguments": {"cmd": name}}
        if err:
            e["is_error"] = True
        events.append(e)
    for i in range(0, len(events), 200):
        r = await client.post(f"/v1/sessions/{SID}/events", headers=bearer(key),
                              json={"user_id": "alice", "events": events[i:i + 200]})
        assert r.status_code == 201, r.text
    r = await client.post("/v1/context", headers=bearer(key), json=turn(
        turn_id="long-1", session_id=SID, query="what is the replica lag now?",
        budget={"max_tokens": 8000, "reserve_output": 1000}))
    assert r.status_code == 200, r.text
    body = r.json()
    assert RULE in "\n".join(s["content"] for s in body["envelope"]["segments"])
