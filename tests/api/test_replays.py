"""POST /v1/replays on the real stores: recorded turns assembled again under variants, as dry
runs (nothing written), compared with what they recorded, without their content."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, turn
from tests.api.test_bundles import bundle, on, promote
from tests.api.test_compaction import _long_session, _seed, _turn

SECRETISH = "zq-lantern-4471"  # a distinctive word of the document: must never come back
QUERY = "why does the refund call time out?"


async def replay(c: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    return await c.post("/v1/replays", headers=bearer(key), json=body)


async def append(c: httpx.AsyncClient, key: str, session_id: str, *texts: str) -> None:
    r = await c.post(f"/v1/sessions/{session_id}/events", headers=bearer(key), json={
        "user_id": "alice", "events": [{"type": "message", "role": "user", "content": t}
                                       for t in texts]})
    assert r.status_code == 201, r.text


async def written(c: httpx.AsyncClient, ops: str, rt: str, session_id: str
                  ) -> tuple[int, int, int]:
    """Manifests, audit records and session events the tenant holds."""
    manifests = (await c.get("/v1/manifests", headers=bearer(ops),
                             params={"limit": 200})).json()["manifests"]
    audit = (await c.get("/v1/audit", headers=bearer(ops), params={"limit": 200})).json()
    events = (await c.get(f"/v1/sessions/{session_id}/events", headers=bearer(rt),
                          params={"user_id": "alice", "limit": 500})).json()
    return len(manifests), len(audit["records"]), len(events["events"])


@pytest.fixture
async def keys(make_key: KeyMaker, tenant: str, other_tenant: str) -> dict[str, str]:
    return {"rt": await make_key(tenant), "ops": await make_key(tenant, "ops"),
            "admin": await make_key(tenant, "admin"),
            "other_ops": await make_key(other_tenant, "ops")}


async def test_a_replay_reproduces_the_recorded_turn_and_writes_nothing(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    rt, ops = keys["rt"], keys["ops"]
    await ingest(client, rt, "answer", f"The refund call times out after 30 seconds when "
                 f"the gateway is slow ({SECRETISH}).")
    await ingest(client, rt, "bobs", "Why the refund call times out for Bob.",
                 acl={"users": ["bob"]})
    await append(client, rt, "s-replay", "The refund for order 1182 timed out again.",
                 "It happened at 14:02 during the gateway incident.")
    r = await client.post("/v1/context", headers=bearer(rt),
                          json=turn(turn_id="t-1", session_id="s-replay", groups=[]))
    assert r.status_code == 200, r.text
    recorded = r.json()["manifest"]
    # After the turn the session grows: a replay of t-1 must not see these events.
    await append(client, rt, "s-replay", "LATER: the refund went through after a retry.")
    before = await written(client, ops, rt, "s-replay")

    r = await replay(client, ops, session_id="s-replay")
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["content"] == "none"
    [row] = got["turns"]
    assert (row["turn_id"], row["status"]) == ("t-1", "replayed")
    assert {s["ref"] for s in row["recorded"]["segments"]} == \
        {s["ref"] for s in recorded["segments"]}
    again = row["variants"]["recorded"]
    assert again["status"] == "ok", again
    assert again["vs_recorded"]["added"] == [] and again["vs_recorded"]["removed"] == []
    assert again["vs_recorded"]["overlap"] == 1.0
    assert again["shape"]["dropped"] == row["recorded"]["dropped"]
    assert again["shape"]["total_tokens"] == recorded["total_tokens"]
    assert got["summary"]["recorded"]["ok"] == 1
    assert got["summary"]["recorded"]["turns_changed"] == 0

    # A dry run: no manifest, audit record or session event was written.
    assert await written(client, ops, rt, "s-replay") == before
    # No text of the turn: not the query, the document, the session's events.
    for text in (QUERY, SECRETISH, "order 1182", "LATER", "gateway"):
        assert text not in r.text


async def test_variants_are_compared_with_the_recorded_turn_and_with_each_other(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    rt, ops, admin = keys["rt"], keys["ops"], keys["admin"]
    for rev, rule in (("3", "Only change RetryConfig."), ("5", "Never touch RetryConfig.")):
        r = await client.post("/v1/bundles", headers=bearer(admin), json=bundle(rev, rule))
        assert r.status_code == 201, r.text
    await promote(client, admin, "3")
    await ingest(client, rt, "answer", "The refund call times out after 30 seconds.")
    r = await client.post("/v1/context", headers=bearer(rt),
                          json=on("s-ab", turn_id="t-ab-1", groups=[]))
    assert r.status_code == 200, r.text
    assert r.json()["manifest"]["bundle"]["revision"] == "3"

    r = await replay(client, ops, turn_ids=["t-ab-1"], variants=[
        {"name": "live"},
        {"name": "rev5", "bundle_revision": "5"},  # registered, never promoted
        {"name": "small", "budget": {"max_tokens": 700}, "retrieval": {"knowledge_limit": 0}},
        {"name": "nosuch", "bundle_revision": "99"}])
    assert r.status_code == 200, r.text
    row = r.json()["turns"][0]
    live, rev5, small, nosuch = (row["variants"][n] for n in ("live", "rev5", "small",
                                                              "nosuch"))
    assert live["vs_recorded"]["added"] == live["vs_recorded"]["removed"] == []
    assert "bundle://repo-payments-rules@5" in rev5["vs_first"]["added"]
    assert "bundle://repo-payments-rules@3" in rev5["vs_first"]["removed"]
    assert rev5["vs_first"]["same_stable_prefix"] is False
    assert small["status"] == "ok", small
    assert small["shape"]["total_tokens"] < live["shape"]["total_tokens"]
    assert not any(ref.startswith("kb://") for ref in
                   (s["ref"] for s in small["shape"]["segments"]))
    assert nosuch == {"status": "error", "error": "not-found"}
    summary = r.json()["summary"]
    assert summary["nosuch"]["errors"] == {"not-found": 1}
    assert summary["rev5"]["turns_changed"] == 1

    # Replaying revision 5 served nothing: the session stays bound to 3, the channel as it was.
    r = await client.post("/v1/context", headers=bearer(rt),
                          json=on("s-ab", turn_id="t-ab-2", groups=[]))
    assert r.json()["manifest"]["bundle"]["revision"] == "3"


async def test_replay_is_for_ops_within_the_tenant(client: httpx.AsyncClient,
                                                   keys: dict[str, str]) -> None:
    rt = keys["rt"]
    r = await client.post("/v1/context", headers=bearer(rt), json=turn(turn_id="t-own"))
    assert r.status_code == 200, r.text
    forbidden = await replay(client, rt, turn_ids=["t-own"])
    assert forbidden.status_code == 403
    assert forbidden.json()["type"] == "forbidden-scope"
    # Another tenant's turn reads exactly as a missing one.
    theirs = (await replay(client, keys["other_ops"], turn_ids=["t-own", "t-none"])).json()
    assert theirs["turns"] == [{"turn_id": "t-own", "status": "not_found"},
                               {"turn_id": "t-none", "status": "not_found"}]


@pytest.mark.parametrize("body", [
    {"variants": [{"name": "a"}, {"name": "a"}]},
    {"turn_ids": ["x", "x"]},
    {"limit": 201},
    {"limit": 101, "variants": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]},
    {"variants": [{"name": str(i)} for i in range(5)]},
    {"variants": [{"name": "a", "budget": {"max_tokens": 10}}]},
    {"variants": [{"name": "a", "surprise": True}]},
])
async def test_bad_replay_requests_are_422(client: httpx.AsyncClient, keys: dict[str, str],
                                           body: dict[str, Any]) -> None:
    r = await replay(client, keys["ops"], **body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")


async def test_a_stored_compaction_view_is_replayed_only_if_made_before_the_turn(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    rt, ops = keys["rt"], keys["ops"]
    await _seed(client, rt, "s-long")
    first = (await _turn(client, rt, "turn-c1"))["manifest"]
    block = f"session://s-long/compaction/{first['compaction']['compaction_id']}"
    assert block in {s["ref"] for s in first["segments"]}
    variants = [{"name": "stored"}, {"name": "raw", "compaction": False}]

    row = (await replay(client, ops, turn_ids=["turn-c1"], variants=variants)).json()["turns"][0]
    stored, raw = row["variants"]["stored"], row["variants"]["raw"]
    assert stored["status"] == "ok", stored
    assert block in {s["ref"] for s in stored["shape"]["segments"]}
    assert block not in stored["vs_recorded"]["removed"]
    assert raw["status"] == "ok", raw  # the raw window, budgeted (long results compressed)
    assert block in raw["vs_first"]["removed"]

    # The session compacts again after more events: that view read events turn-c1 never saw,
    # so a replay of turn-c1 does not serve it (nor the first, no longer the latest).
    r = await client.post("/v1/sessions/s-long/events", headers=bearer(rt),
                          json={"user_id": "alice", "events": _long_session()[3:]})
    assert r.status_code == 201, r.text
    third = (await _turn(client, rt, "turn-c3"))["manifest"]["compaction"]
    assert third["compaction_id"] != first["compaction"]["compaction_id"]
    row = (await replay(client, ops, turn_ids=["turn-c1"], variants=variants[:1])
           ).json()["turns"][0]
    later = row["variants"]["stored"]
    assert later["status"] == "ok", later
    assert not any("/compaction/" in s["ref"] for s in later["shape"]["segments"])
