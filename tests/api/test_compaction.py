"""Compaction wired into the service, on the real stores: the automatic trigger in a turn,
the manual endpoint, ownership, and the incident-2 qualifier surviving every compaction."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from app.main import Container, create_app
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

DISCOUNT = "The discount applies only before 2026-06-30, channel customers excepted."
BUDGET = {"max_tokens": 3000, "reserve_output": 500}


def _long_session(n_turns: int = 22) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "Review the distributor contract."},
        {"type": "message", "role": "user", "content": f"Remember clause 7.2: {DISCOUNT}"},
        {"type": "message", "role": "assistant", "content": "Noted clause 7.2."},
    ]
    for i in range(n_turns):
        events += [
            {"type": "message", "role": "user",
             "content": f"Round {i}: please check the payment terms of annex {i} again."},
            {"type": "tool_call", "call_id": f"c{i}", "name": "read_annex",
             "arguments": {"annex": i}},
            {"type": "tool_result", "call_id": f"c{i}",
             "content": f"Annex {i}: payment within 30 days of invoice; " + "terms " * 60},
            {"type": "message", "role": "assistant",
             "content": f"Annex {i} payment terms are net 30, consistent with the contract."},
        ]
    return events


async def _seed(client: httpx.AsyncClient, key: str, sid: str, user: str = "alice") -> None:
    events = _long_session()
    assert len(events) >= 80
    r = await client.post(f"/v1/sessions/{sid}/events", headers=bearer(key),
                          json={"user_id": user, "events": events})
    assert r.status_code == 201, r.text
    r = await client.put("/v1/tasks/t-contract/checkpoint", headers=bearer(key), json={
        "user_id": user, "goal": "Answer the sales team's discount question",
        "session_id": sid})
    assert r.status_code == 200, r.text


def _text(body: dict[str, Any]) -> str:
    return "\n".join(s["content"] for s in body["envelope"]["segments"])


async def _turn(client: httpx.AsyncClient, key: str, turn_id: str) -> dict[str, Any]:
    r = await client.post("/v1/context", headers=bearer(key), json=turn(
        turn_id=turn_id, session_id="s-long", task_id="t-contract", budget=BUDGET,
        query="Can channel customers use the discount?"))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_auto_compaction_in_a_turn(client: httpx.AsyncClient, make_key: KeyMaker,
                                         tenant: str) -> None:
    key = await make_key(tenant)
    await _seed(client, key, "s-long")
    body = await _turn(client, key, "turn-c1")
    man = body["manifest"]
    record = man["compaction"]
    assert record is not None and record["type"] == "compaction.completed", record
    assert record["validation"]["ok"] is True and record["breaker_open"] is False
    assert record["trigger"] == "auto" and record["tokens_after"] < record["tokens_before"]
    assert record["checkpoint_revision_before"] == 1
    assert record["checkpoint_revision_after"] == 2
    assert DISCOUNT in _text(body)
    assert man["total_tokens"] <= BUDGET["max_tokens"] - BUDGET["reserve_output"]
    refs = [s["ref"] for s in man["segments"]]
    assert f"session://s-long/compaction/{record['compaction_id']}" in refs
    assert "task://t-contract/checkpoint/2#core" in refs
    cp = await client.get("/v1/tasks/t-contract/checkpoint", headers=bearer(key),
                          params={"user_id": "alice"})
    assert cp.status_code == 200, cp.text
    got = cp.json()
    assert got["revision"] == 2
    assert any(c["text"].rstrip(".") in DISCOUNT or DISCOUNT.rstrip(".") in c["text"]
               for c in got["constraints"]), got["constraints"]
    assert record["reused"] is False
    # the turn after serves the same view again (nothing new to compact): no second run
    again = await _turn(client, key, "turn-c2")
    second = again["manifest"]["compaction"]
    assert record["served"] == "new" and record["pending"] is False
    assert second == {**record, "reused": True, "served": "stored"}
    assert DISCOUNT in _text(again)
    assert f"session://s-long/compaction/{record['compaction_id']}" in [
        s["ref"] for s in again["manifest"]["segments"]]
    stored = await client.get("/v1/manifests/turn-c1", headers=bearer(key))
    assert stored.status_code == 200 and stored.json()["compaction"] == record
    # once the events appended since outgrow the threshold, it compacts again, on top of the
    # first run (lineage), and the qualifier still cannot be dropped
    r = await client.post("/v1/sessions/s-long/events", headers=bearer(key),
                          json={"user_id": "alice", "events": _long_session()[3:]})
    assert r.status_code == 201, r.text
    third = await _turn(client, key, "turn-c3")
    rerun = third["manifest"]["compaction"]
    assert rerun["reused"] is False and rerun["compaction_id"] != record["compaction_id"]
    assert rerun["previous_compaction_id"] == record["compaction_id"]
    assert rerun["validation"]["ok"] is True
    assert DISCOUNT in _text(third)


async def test_manual_compaction_and_ownership(client: httpx.AsyncClient, make_key: KeyMaker,
                                               tenant: str) -> None:
    key = await make_key(tenant)
    await _seed(client, key, "s-long")
    r = await client.post("/v1/sessions/s-long/compact", headers=bearer(key), json={
        "user_id": "alice", "task_id": "t-contract", "budget_tokens": 800})
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["type"] == "compaction.completed" and rec["trigger"] == "manual"
    assert rec["validation"]["ok"] is True and rec["breaker_open"] is False
    assert rec["cut_seq"] is not None and len(rec["summary_sha256"]) == 64
    assert rec["previous_compaction_id"] is None and rec["checkpoint_revision_after"] == 2
    other = await client.post("/v1/sessions/s-long/compact", headers=bearer(key), json={
        "user_id": "mallory", "budget_tokens": 800})
    assert other.status_code == 404, other.text
    missing = await client.post("/v1/sessions/nope/compact", headers=bearer(key), json={
        "user_id": "alice", "budget_tokens": 800})
    assert missing.status_code == 404
    # a later turn is served the manual run's view while it still fits
    body = await _turn(client, key, "turn-m1")
    served = body["manifest"]["compaction"]
    assert served["compaction_id"] == rec["compaction_id"] and served["reused"] is True
    assert DISCOUNT in _text(body)


async def test_small_session_has_no_compaction(client: httpx.AsyncClient, make_key: KeyMaker,
                                               tenant: str) -> None:
    key = await make_key(tenant)
    r = await client.post("/v1/sessions/s-short/events", headers=bearer(key), json={
        "user_id": "alice", "events": [{"type": "message", "role": "user", "content": "hi"}]})
    assert r.status_code == 201
    r = await client.post("/v1/context", headers=bearer(key),
                          json=turn(turn_id="turn-s", session_id="s-short"))
    assert r.status_code == 200, r.text
    assert r.json()["manifest"]["compaction"] is None


async def test_a_view_keeping_an_event_older_than_the_window_is_served_again(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    """An unresolved error early in the session is sticky: the view keeps it, though it lies
    before the tail's history window. The next turn serves the stored view (from the whole
    tail), not a new compaction every turn."""
    key = await make_key(tenant)
    failure = "deploy_refund failed: migration 0042 holds a lock on refunds"
    events = _long_session()
    events[3:3] = [
        {"type": "tool_call", "call_id": "d1", "name": "deploy_refund", "arguments": {}},
        {"type": "tool_result", "call_id": "d1", "is_error": True, "content": failure}]
    r = await client.post("/v1/sessions/s-long/events", headers=bearer(key),
                          json={"user_id": "alice", "events": events})
    assert r.status_code == 201, r.text
    first = await _turn(client, key, "turn-w1")
    record = first["manifest"]["compaction"]
    assert record is not None and record["reused"] is False
    assert failure in _text(first)  # sticky: 90 events later it is still shown
    again = await _turn(client, key, "turn-w2")
    assert again["manifest"]["compaction"] == {**record, "reused": True, "served": "stored"}
    assert failure in _text(again)


@contextlib.asynccontextmanager
async def _cold_worker(container: Container
                       ) -> AsyncIterator[tuple[httpx.AsyncClient, Container]]:
    """Another worker on the same stores, its findings cache empty."""
    other = await Container.open(container.settings)
    try:
        transport = httpx.ASGITransport(app=create_app(container=other))
        async with httpx.AsyncClient(transport=transport, base_url="http://w2") as w2:
            yield w2, other
    finally:
        await other.close()


def _was_scanned(worker: Container, text: str) -> bool:
    return hashlib.blake2b(text.encode(), digest_size=16).digest() in {
        k[1] for k in worker.findings._entries}


async def test_a_worker_serving_a_stored_view_does_not_scan_its_block(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    """The block was scanned when the compaction made it; its findings are stored with the
    view, so another worker, its findings cache cold, serves the view without a scan."""
    key = await make_key(tenant)
    await _seed(client, key, "s-long")
    first = await _turn(client, key, "turn-b1")
    record = first["manifest"]["compaction"]
    block_ref = f"session://s-long/compaction/{record['compaction_id']}"
    (block,) = [s["content"] for s in first["envelope"]["segments"] if s["ref"] == block_ref]
    async with _cold_worker(container) as (w2, other):
        again = await _turn(w2, key, "turn-b2")
        assert again["manifest"]["compaction"]["reused"] is True
        assert block in _text(again)
        assert not _was_scanned(other, block)
        assert other.findings.misses >= 1  # (the cache is in use: the query was scanned)


async def test_a_compacting_turn_does_not_rescan_the_events_its_view_keeps(
        make_key: KeyMaker, tenant: str, container: Container) -> None:
    """The compaction reads the archive, which keeps no findings; the events its view keeps
    take theirs from the tail's copies, scanned when they were appended."""
    key = await make_key(tenant)
    async with _cold_worker(container) as (w2, other):
        await _seed(w2, key, "s-long")
        scanned_at_append = set(other.findings._entries)
        other.findings._entries.clear()  # what the append scanned is not the turn's doing
        body = await _turn(w2, key, "turn-k1")
        assert body["manifest"]["compaction"]["reused"] is False
        kept = [s["content"] for s in body["envelope"]["segments"]
                if s["ref"].startswith("session://s-long/events/")]
        assert kept and scanned_at_append
        assert not [text for text in kept if _was_scanned(other, text)]
