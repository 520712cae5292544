"""The memory API end to end: gate decisions, recall into a turn, review, isolation, delete."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

REDIS6 = "退款服务集成测试依赖本地 Redis 6"
REDIS7 = "退款服务集成测试依赖本地 Redis 7"


def mem(statement: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "statement": statement, "scope": {"level": "user", "user_id": "alice"},
        "origin": "user_stated", "source_session": "sess_1", "owner": "alice"}
    body.update(extra)
    return body


async def post(c: httpx.AsyncClient, key: str, body: dict[str, Any]) -> httpx.Response:
    return await c.post("/v1/memories", headers=bearer(key), json=body)


async def test_write_recall_supersede_and_audit(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    evidence = {"origin": "verified_tool_result", "evidence_ref": "ci://run/233/log#redis"}
    first = await post(client, key, mem(REDIS6, **evidence))
    assert first.status_code == 201, first.text
    assert first.json()["decision"] == "accepted"
    old_id = first.json()["memory"]["memory_id"]
    again = await post(client, key, mem("退款服务集成测试依赖本地 Redis 6。", **evidence))
    assert again.status_code == 200
    assert again.json()["decision"] == "duplicate"
    new = await post(client, key, mem(REDIS7, **{**evidence, "evidence_ref": "ci://run/234"}))
    assert new.json()["decision"] == "superseded", new.text
    new_id = new.json()["memory"]["memory_id"]
    assert new.json()["memory"]["supersedes"] == old_id

    old = (await client.get(f"/v1/memories/{old_id}", headers=bearer(key),
                            params={"user_id": "alice"})).json()
    assert old["status"] == "superseded"
    assert [h["action"] for h in old["history"]] == ["created", "confirmed", "superseded"]

    r = await client.post("/v1/context", headers=bearer(key),
                          json=turn(query="退款服务集成测试依赖哪个 Redis 版本?"))
    assert r.status_code == 200, r.text
    refs = [s["ref"] for s in r.json()["manifest"]["segments"]]
    assert f"mem://{new_id}@v1" in refs
    assert not any(old_id in ref for ref in refs)
    admin = await make_key(tenant, "ops")
    audit = (await client.get("/v1/audit", headers=bearer(admin),
                              params={"turn_id": r.json()["turn_id"]})).json()["records"]
    assert any(a["kind"] == "memory.recalled" and new_id in a["ref"] for a in audit)


async def test_gate_rejections_are_200(client: httpx.AsyncClient, make_key: KeyMaker,
                                       tenant: str) -> None:
    key = await make_key(tenant)
    cases = {
        "my github token is ghp_" + "a1B2" * 9: "memory.secret",
        "我的身份证号是 11010519491231002X": "memory.personal_data",
        "the build artefact is in /tmp/build-4711/out.jar": "memory.temporary",
    }
    for statement, type_ in cases.items():
        r = await post(client, key, mem(statement))
        assert r.status_code == 200, r.text
        assert (r.json()["decision"], r.json()["type"], r.json()["memory"]) == \
            ("rejected", type_, None)
    guess = mem("the timeout is probably caused by the retry storm", origin="model_inference")
    assert (await post(client, key, guess)).json()["type"] == "memory.inference_without_task"
    hyp = await post(client, key, {**guess, "task_id": "task_1"})
    assert hyp.status_code == 201
    assert hyp.json()["decision"] == "hypothesis"
    assert (await post(client, key, {**mem("x"), "tenant_id": "other"})).status_code == 403
    assert (await post(client, key, mem("x", origin="hunch"))).status_code == 422


async def test_team_pending_until_approved(client: httpx.AsyncClient, make_key: KeyMaker,
                                           tenant: str) -> None:
    key, admin = await make_key(tenant), await make_key(tenant, "admin")
    body = mem("Refund incidents page the payments on-call first",
               scope={"level": "team", "domain": "payments"}, origin="team_decision",
               evidence_ref="adr://payments/12")
    r = await post(client, key, body)
    assert (r.status_code, r.json()["decision"]) == (201, "pending")
    mid = r.json()["memory"]["memory_id"]
    query = turn(query="who gets paged first for refund incidents?")
    before = (await client.post("/v1/context", headers=bearer(key), json=query)).json()
    assert not any(mid in s["ref"] for s in before["manifest"]["segments"])
    assert (await client.post(f"/v1/memories/{mid}/approve", headers=bearer(key))
            ).status_code == 403
    ok = await client.post(f"/v1/memories/{mid}/approve", headers=bearer(admin))
    assert ok.json()["status"] == "active"
    assert (await client.post(f"/v1/memories/{mid}/approve", headers=bearer(admin))
            ).status_code == 409
    after = (await client.post("/v1/context", headers=bearer(key), json=query)).json()
    assert any(mid in s["ref"] for s in after["manifest"]["segments"])



def _sample(metrics: str, series: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith(series))


async def test_gate_decisions_and_reviews_are_exported(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    """Production's view of the gate (issue 21.5): decisions by type, and what people later
    approved, rejected or deleted of its work."""
    key, admin = await make_key(tenant), await make_key(tenant, "admin")
    secret = 'ctxgate_memory_decisions_total{decision="rejected",type="memory.secret"}'
    approved = 'ctxgate_memory_reviews_total{verdict="approved"}'
    deleted = 'ctxgate_memory_reviews_total{verdict="deleted"}'
    before = (await client.get("/metrics")).text
    await post(client, key, mem("my github token is ghp_" + "Zq8x" * 9))
    held = await post(client, key, mem("Refunds over 500 EUR need a second approver",
                                       scope={"level": "team", "domain": "payments"},
                                       origin="team_decision", evidence_ref="adr://p/3"))
    await client.post(f"/v1/memories/{held.json()['memory']['memory_id']}/approve",
                      headers=bearer(admin))
    kept = await post(client, key, mem("Alice reviews refund runbooks on Fridays"))
    assert kept.status_code == 201, kept.text
    gone = await client.delete(f"/v1/memories/{kept.json()['memory']['memory_id']}",
                               headers=bearer(key), params={"user_id": "alice"})
    assert gone.status_code == 204, gone.text
    after = (await client.get("/metrics")).text
    for series in (secret, approved, deleted):
        assert _sample(after, series) == _sample(before, series) + 1, series


async def test_isolation_and_delete(client: httpx.AsyncClient, make_key: KeyMaker,
                                    tenant: str, other_tenant: str) -> None:
    key, other = await make_key(tenant), await make_key(other_tenant)
    mid = (await post(client, key, mem("Alice prefers answers in Chinese"))
           ).json()["memory"]["memory_id"]
    path = f"/v1/memories/{mid}"
    assert (await client.get(path, headers=bearer(key), params={"user_id": "alice"})
            ).status_code == 200
    assert (await client.get(path, headers=bearer(key), params={"user_id": "bob"})
            ).status_code == 404
    assert (await client.get(path, headers=bearer(other), params={"user_id": "alice"})
            ).status_code == 404
    bob_turn = await client.post("/v1/context", headers=bearer(key),
                                 json=turn(user_id="bob", query="answers in Chinese?"))
    assert not any(mid in s["ref"] for s in bob_turn.json()["manifest"]["segments"])
    listed = (await client.get("/v1/memories", headers=bearer(key),
                               params={"user_id": "alice"})).json()["memories"]
    assert [m["memory_id"] for m in listed] == [mid]
    assert (await client.delete(path, headers=bearer(key), params={"user_id": "bob"})
            ).status_code == 404
    assert (await client.delete(path, headers=bearer(key), params={"user_id": "alice"})
            ).status_code == 204
    assert (await client.get(path, headers=bearer(key), params={"user_id": "alice"})
            ).status_code == 404


async def test_pinned_snapshot_is_frozen_per_session(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await post(client, key, mem("Always answer in British English", pinned=True))
    body = turn(session_id="sess_pin", query="hello")
    one = (await client.post("/v1/context", headers=bearer(key), json=body)).json()
    pinned = [s for s in one["manifest"]["segments"] if s["reason"].startswith("pinned")]
    assert len(pinned) == 1
    assert pinned[0]["section"] == "stable"
    await post(client, key, mem("Prefer tables over bullet lists", pinned=True))
    two = (await client.post("/v1/context", headers=bearer(key), json=body)).json()
    assert two["envelope"]["stable_prefix_sha256"] == one["envelope"]["stable_prefix_sha256"]
    fresh = (await client.post("/v1/context", headers=bearer(key),
                               json=turn(session_id="sess_new", query="hello"))).json()
    assert len([s for s in fresh["manifest"]["segments"]
                if s["reason"].startswith("pinned")]) == 2
