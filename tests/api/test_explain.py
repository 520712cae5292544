"""GET /v1/manifests/{turn_id}/explain on the real stores: why a source was or was not seen."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import httpx
import pytest

from app.adapters.postgres.db import Sql
from app.main import Container
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import checkpoint, ingest, session, turn

QUERY = "why does the refund call time out?"
LONG = "The refund call can time out when the payment gateway is slow to answer. " * 20


async def explain(c: httpx.AsyncClient, key: str, turn_id: str, ref: str) -> httpx.Response:
    return await c.get(f"/v1/manifests/{turn_id}/explain", params={"ref": ref},
                       headers=bearer(key))


async def assembled(c: httpx.AsyncClient, key: str, turn_id: str, **extra: Any
                    ) -> dict[str, Any]:
    r = await c.post("/v1/context", headers=bearer(key),
                     json=turn(turn_id=turn_id, query=QUERY, groups=[], **extra))
    assert r.status_code == 200, r.text
    manifest: dict[str, Any] = r.json()["manifest"]
    return manifest


@pytest.fixture
async def keys(client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
               other_tenant: str) -> dict[str, str]:
    """A tenant with alice's readable documents, bob's, and another tenant's."""
    rt, ops = await make_key(tenant), await make_key(tenant, "ops")
    other = await make_key(other_tenant)
    await ingest(client, rt, "answer", "Why the refund call can time out: the gateway "
                 "waits 30 seconds before the refund call times out.")
    await ingest(client, rt, "weak", "Store credit eligibility rules for a refund.")
    await ingest(client, rt, "long", LONG)
    await ingest(client, rt, "cafeteria", "Cafeteria menu: lentil soup on Tuesdays, "
                 "grilled fish on Fridays.")
    await ingest(client, rt, "bobs", "Why the refund call can time out for Bob's accounts.",
                 acl={"users": ["bob"]})
    await ingest(client, other, "theirs", "Why the refund call can time out, elsewhere.")
    return {"rt": rt, "ops": ops, "other": other, "other_ops": await make_key(other_tenant,
                                                                              "ops")}


def check_shape(body: dict[str, Any], turn_id: str, ref: str) -> None:
    assert set(body) == {"turn_id", "ref", "outcome", "stage", "reason", "detail",
                         "evaluated_at"}
    assert (body["turn_id"], body["ref"]) == (turn_id, ref)
    assert datetime.fromisoformat(body["evaluated_at"]).tzinfo is not None


async def test_each_stage_explains_its_own_drop(client: httpx.AsyncClient,
                                                keys: dict[str, str]) -> None:
    manifest = await assembled(client, keys["rt"], "turn-a", retrieval={"min_score": 0.7})
    ops = keys["ops"]

    r = await explain(client, ops, "turn-a", "kb://answer")
    assert r.status_code == 200, r.text
    included = r.json()
    check_shape(included, "turn-a", "kb://answer")
    seg = next(s for s in manifest["segments"] if s["ref"].startswith("kb://answer#"))
    assert (included["outcome"], included["stage"]) == ("included", None)
    assert included["detail"]["segment_id"] == seg["id"]

    weak = (await explain(client, ops, "turn-a", "kb://weak")).json()
    assert (weak["outcome"], weak["stage"]) == ("dropped", "relevance")
    assert weak["detail"]["rule"] == "below_floor" and weak["detail"]["floor"] == 0.7
    assert weak["detail"]["score"] < 0.7 and weak["detail"]["rank"] >= 1

    bobs = (await explain(client, ops, "turn-a", "kb://bobs")).json()
    assert (bobs["outcome"], bobs["stage"]) == ("dropped", "permission")
    assert bobs["detail"]["label"] == "acl"
    assert "Bob" not in bobs["reason"]  # labels, never content
    chunk = (await explain(client, ops, "turn-a", "kb://bobs#v1:c0")).json()
    assert chunk["detail"]["label"] == "acl"


async def test_another_tenants_source_is_the_same_404_as_a_missing_one(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    await assembled(client, keys["rt"], "turn-b")
    theirs = await explain(client, keys["ops"], "turn-b", "kb://theirs")
    missing = await explain(client, keys["ops"], "turn-b", "kb://nowhere")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.headers["content-type"] == "application/problem+json"
    assert theirs.json()["type"] == missing.json()["type"] == "not-found"
    assert theirs.json()["detail"].replace("theirs", "X") == \
        missing.json()["detail"].replace("nowhere", "X")
    # the other tenant's ops key cannot reach this tenant's turn at all
    assert (await explain(client, keys["other_ops"], "turn-b", "kb://theirs")).status_code \
        == 404


async def test_turns_that_are_not_the_callers_are_404(
        client: httpx.AsyncClient, keys: dict[str, str], make_key: KeyMaker,
        tenant: str) -> None:
    await assembled(client, keys["rt"], "turn-c")
    second_runtime = await make_key(tenant)
    assert (await explain(client, keys["ops"], "turn-none", "kb://answer")).status_code == 404
    assert (await explain(client, second_runtime, "turn-c", "kb://answer")).status_code == 404
    own = await explain(client, keys["rt"], "turn-c", "kb://answer")
    assert own.status_code == 403  # its own turn exists; explain is for ops and admin keys
    admin = await make_key(tenant, "admin")
    assert (await explain(client, admin, "turn-c", "kb://answer")).status_code == 200
    bad = await explain(client, keys["ops"], "turn-c", "not a ref")
    assert bad.status_code == 422


async def test_a_document_beyond_the_ops_keys_own_bounds_is_absent(
        client: httpx.AsyncClient, keys: dict[str, str], make_key: KeyMaker,
        tenant: str) -> None:
    await ingest(client, keys["rt"], "conf", "Why the refund call can time out, in depth.",
                 sensitivity="confidential")
    await assembled(client, keys["rt"], "turn-i")  # an internal turn
    wide = (await explain(client, keys["ops"], "turn-i", "kb://conf")).json()
    assert (wide["stage"], wide["detail"]["label"]) == ("permission", "data_level"), wide
    narrow = await make_key(tenant, "ops", max_data_level="internal")
    assert (await explain(client, narrow, "turn-i", "kb://conf")).status_code == 404


async def test_a_tight_budget_drop_names_section_and_shortfall(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    await assembled(client, keys["rt"], "turn-d",
                    budget={"max_tokens": 256, "reserve_output": 0},
                    retrieval={"min_score": 0.0})
    r = (await explain(client, keys["ops"], "turn-d", "kb://long")).json()
    assert (r["outcome"], r["stage"]) == ("dropped", "budget"), r
    assert r["detail"]["section"] == "dynamic"
    assert r["detail"]["shortfall"] > 0
    assert r["detail"]["needed"] - r["detail"]["available"] == r["detail"]["shortfall"]


async def test_a_source_never_retrieved_gets_its_rank(client: httpx.AsyncClient,
                                                     keys: dict[str, str]) -> None:
    await assembled(client, keys["rt"], "turn-e", retrieval={"knowledge_limit": 1})
    r = (await explain(client, keys["ops"], "turn-e", "kb://cafeteria")).json()
    assert (r["outcome"], r["stage"]) == ("not_a_candidate", None), r
    assert r["detail"]["depth"] == 1
    assert r["detail"]["best_rank"] > 1
    assert "fts" not in r["detail"]["ranks"]  # no query word: only meaning ranks it
    await ingest(client, keys["rt"], "cafeteria", "Cafeteria menu, new season.", version=2)
    old = (await explain(client, keys["ops"], "turn-e", "kb://cafeteria#v1:c0")).json()
    assert old["outcome"] == "not_a_candidate" and "superseded" in old["reason"], old


async def counts_of(c: httpx.AsyncClient, ops: str, turn_id: str
                    ) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """The turn's permission counts, written just after the turn (off its response path)."""
    for _ in range(100):
        r = await c.get("/v1/audit", params={"turn_id": turn_id}, headers=bearer(ops))
        assert r.status_code == 200, r.text
        counts = [x for x in r.json()["records"] if x["kind"] == "permission.withheld"]
        if counts:
            return r, counts
        await asyncio.sleep(0.05)
    raise AssertionError(f"no permission counts for {turn_id}")


async def test_permission_counts_reach_the_audit_log_without_refs(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    await assembled(client, keys["rt"], "turn-f")
    r, counts = await counts_of(client, keys["ops"], "turn-f")
    assert len(counts) == 1
    assert counts[0]["ref"] is None
    assert counts[0]["detail"]["counts"] == {"acl": 1}
    assert "bobs" not in r.text and "theirs" not in r.text


async def test_sessions_tasks_and_memories_are_checked_for_their_owner(
        client: httpx.AsyncClient, keys: dict[str, str]) -> None:
    rt, ops = keys["rt"], keys["ops"]
    await session(client, rt, "s-alice", user="alice")
    await session(client, rt, "s-bob", user="bob")
    await checkpoint(client, rt, "task-bob", user="bob")
    bob_memory = await client.post("/v1/memories", headers=bearer(rt), json={
        "statement": "Bob prefers refunds to the original card", "origin": "user_stated",
        "scope": {"level": "user", "user_id": "bob"}, "source_session": "s-bob",
        "owner": "bob"})
    assert bob_memory.status_code == 201, bob_memory.text
    memory_id = bob_memory.json()["memory"]["memory_id"]
    await assembled(client, rt, "turn-g", session_id="s-alice")

    for ref in ("session://s-bob", "session://s-bob/events/1", "task://task-bob",
                f"mem://{memory_id}@v1"):
        r = (await explain(client, ops, "turn-g", ref)).json()
        assert (r["stage"], r["detail"].get("label")) == ("permission", "owner"), (ref, r)
    own = (await explain(client, ops, "turn-g", "session://s-alice/events/1")).json()
    assert own["outcome"] == "included", own
    # alice's sessions: one her turn's visibility (tree) does not open, one it spawned
    await session(client, rt, "s-alice-elsewhere", user="alice")
    child = await client.post("/v1/sessions/s-alice-child/events", headers=bearer(rt), json={
        "user_id": "alice", "parent_session_id": "s-alice",
        "events": [{"type": "message", "role": "user", "content": "lunch plans"}]})
    assert child.status_code == 201, child.text
    away = (await explain(client, ops, "turn-g", "session://s-alice-elsewhere")).json()
    assert (away["stage"], away["detail"]["label"], away["detail"]["visibility"]) == (
        "permission", "visibility", "tree"), away
    spawned = (await explain(client, ops, "turn-g", "session://s-alice-child")).json()
    assert spawned["outcome"] == "not_a_candidate", spawned
    for missing in ("session://s-none", "session://s-alice/events/99", "task://task-none",
                    "mem://m-none@v1"):
        assert (await explain(client, ops, "turn-g", missing)).status_code == 404


async def test_a_turn_without_its_record_answers_from_its_manifest_only(
        client: httpx.AsyncClient, keys: dict[str, str], container: Container,
        tenant: str) -> None:
    await assembled(client, keys["rt"], "turn-h")
    async with container.db.tenant_tx(tenant) as conn:  # what erasure leaves of a turn
        await conn.execute(Sql("UPDATE manifests SET recorded = NULL "
                               "WHERE tenant_id = :t AND turn_id = 'turn-h'"), {"t": tenant})
    cited = await explain(client, keys["ops"], "turn-h", "kb://answer")
    assert cited.status_code == 200 and cited.json()["outcome"] == "included"
    other = await explain(client, keys["ops"], "turn-h", "kb://bobs")
    assert other.status_code == 409
    assert other.json()["type"] == "not-explainable"
