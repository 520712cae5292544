"""Task state is scanned once, when its revision is written: a worker whose findings cache is
cold serves the task's first turn without scanning its task state, and still applies what
the detectors found (an e-mail address in a constraint is masked)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import httpx

from app.adapters.postgres.tasks import PgTaskStore
from app.core.candidates import checkpoint_core_text
from app.main import Container
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn
from tests.api.test_compaction import DISCOUNT, _cold_worker, _long_session, _was_scanned

RULE = "Only escalate refunds above 500 EUR to finance-oncall@example.com before Friday."


async def _checkpoint(client: httpx.AsyncClient, key: str, task_id: str) -> None:
    r = await client.put(f"/v1/tasks/{task_id}/checkpoint", headers=bearer(key), json={
        "user_id": "alice", "goal": "Close the refund backlog",
        "constraints": [{"text": RULE, "kind": "only"}]})
    assert r.status_code == 200, r.text


async def _core_text(worker: Container, tenant: str, task_id: str) -> str:
    cp = await worker.tasks.get(tenant_id=tenant, task_id=task_id, user_id="alice")
    return checkpoint_core_text(cp, datetime.now(UTC))


async def test_a_cold_worker_takes_the_stored_findings_of_the_task_state(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    await _checkpoint(client, key, "t-scan")
    async with _cold_worker(container) as (w2, other):
        r = await w2.post("/v1/context", headers=bearer(key),
                          json=turn(task_id="t-scan", turn_id="t-scan-1"))
        assert r.status_code == 200, r.text
        core = await _core_text(other, tenant, "t-scan")
        assert not _was_scanned(other, core)
        text = "\n".join(s["content"] for s in r.json()["envelope"]["segments"])
        assert "Close the refund backlog" in text
        assert "finance-oncall@example.com" not in text  # the stored finding was applied

        # Control: a revision stored without findings (written before they were kept) is
        # scanned by the turn, so the assertion above can fail.
        cp = await other.tasks.get(tenant_id=tenant, task_id="t-scan", user_id="alice")
        await PgTaskStore(other.db).put(tenant_id=tenant, checkpoint=replace(cp, scanned=()),
                                        expected_revision=cp.revision)
        r = await w2.post("/v1/context", headers=bearer(key),
                          json=turn(task_id="t-scan", turn_id="t-scan-2"))
        assert r.status_code == 200, r.text
        assert _was_scanned(other, await _core_text(other, tenant, "t-scan"))


async def test_a_cold_worker_takes_the_stored_findings_of_a_session_state(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    """A session without a task: compaction commits its state (with findings); another
    worker's turn serves the state without scanning it."""
    key = await make_key(tenant)
    r = await client.post("/v1/sessions/s-notask/events", headers=bearer(key),
                          json={"user_id": "alice", "events": _long_session()})
    assert r.status_code == 201, r.text
    ask = {"session_id": "s-notask", "query": "Can channel customers use the discount?",
           "budget": {"max_tokens": 3000, "reserve_output": 500}}
    r = await client.post("/v1/context", headers=bearer(key), json=turn(turn_id="nt-1", **ask))
    assert r.status_code == 200, r.text
    assert r.json()["manifest"]["compaction"] is not None
    async with _cold_worker(container) as (w2, other):
        r = await w2.post("/v1/context", headers=bearer(key), json=turn(turn_id="nt-2", **ask))
        assert r.status_code == 200, r.text
        states = [s for s in r.json()["envelope"]["segments"]
                  if s["ref"].startswith("session://s-notask/state/")]
        assert states and DISCOUNT in "\n".join(s["content"] for s in states)
        assert not any(_was_scanned(other, s["content"]) for s in states)
