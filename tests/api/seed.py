"""Small builders for API tests: a document, a session, a checkpoint, a turn."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import bearer

DISCOUNT = "The discount applies only before 2026-06-30, channel customers excepted"


async def ingest(c: httpx.AsyncClient, key: str, doc_id: str, text: str, **extra: Any) -> None:
    body = {"doc_id": doc_id, "version": 1, "text": text, "domain": "payments",
            "sensitivity": "internal", "trust": "reviewed", "acl": None, **extra}
    r = await c.post("/v1/knowledge/documents", headers=bearer(key), json=body)
    assert r.status_code == 201, r.text


async def session(c: httpx.AsyncClient, key: str, session_id: str, user: str = "alice",
                  n: int = 2) -> list[int]:
    events = [{"type": "message", "role": "user" if i % 2 == 0 else "assistant",
               "content": f"message {i} about the refund timeout"} for i in range(n)]
    r = await c.post(f"/v1/sessions/{session_id}/events", headers=bearer(key),
                     json={"user_id": user, "events": events})
    assert r.status_code == 201, r.text
    return list(r.json()["seqs"])


async def checkpoint(c: httpx.AsyncClient, key: str, task_id: str, user: str = "alice",
                     **extra: Any) -> int:
    body = {"user_id": user, "goal": "Fix the refund timeout and add a regression test",
            "constraints": [{"text": DISCOUNT, "kind": "only"}],
            "pending_approvals": ["SRE sign-off on the retry cap"],
            "next_safe_action": "Only change RetryConfig and rerun RefundIT", **extra}
    r = await c.put(f"/v1/tasks/{task_id}/checkpoint", headers=bearer(key), json=body)
    assert r.status_code == 200, r.text
    return int(r.json()["revision"])


def turn(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "user_id": "alice", "groups": ["payments-oncall"], "domain": "payments",
        "data_level": "internal", "query": "why does the refund call time out?",
        "budget": {"max_tokens": 6000, "reserve_output": 1000}}
    body.update(extra)
    return body
