"""'Forget me' end to end: plant U and V in every layer, erase U, check the receipt and the rest."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.adapters.postgres.db import Sql
from app.main import Container
from app.ports import AuditRecord
from app.service.erasure import tombstone
from tests.api.conftest import KeyMaker, bearer

EMBEDDING = [0.05] * 384
U, V = "user-u", "user-v"
MEMORY_SQL = Sql("""
INSERT INTO memories (tenant_id, memory_id, statement, norm_sha256, origin, scope_level, user_id,
    owner, source_session, sensitivity, status, search_text)
VALUES (:t, :id, :s, md5(:s), 'user_stated', :level, :u, :owner, :sess, 1, 'active', :s)""")
HISTORY_SQL = Sql("""
INSERT INTO memory_history (tenant_id, memory_id, version, action, actor, snapshot)
VALUES (:t, :id, 1, 'created', 'key', CAST(:snap AS jsonb))""")


def canary(name: str) -> str:
    return f"CANARY-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def worker(container: Container) -> AsyncIterator[None]:
    container.erasure_worker.start()  # ASGITransport runs no lifespan
    yield
    await container.erasure_worker.stop()


def turn(user: str, turn_id: str, **extra: Any) -> dict[str, Any]:
    return {"turn_id": turn_id, "user_id": user, "groups": [], "data_level": "internal",
            "query": "refund timeout notes", "query_embedding": EMBEDDING,
            "budget": {"max_tokens": 6000, "reserve_output": 1000}, **extra}


async def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.text}"
    return r.json() if r.content else None


async def _memory(container: Container, tenant: str, mid: str, statement: str, *,
                  level: str, user: str | None, owner: str) -> None:
    async with container.db.tenant_tx(tenant) as conn:
        await conn.execute(MEMORY_SQL, {"t": tenant, "id": mid, "s": statement, "level": level,
                                        "u": user, "owner": owner, "sess": "s-u"})
        await conn.execute(HISTORY_SQL, {"t": tenant, "id": mid, "snap": (
            f'{{"statement": "{statement}", "user_id": "{user}", "owner": "{owner}"}}')})


async def _plant_user(c: httpx.AsyncClient, key: str, user: str, tag: str) -> dict[str, str]:
    said = {"session": canary(f"{tag}-session"), "goal": canary(f"{tag}-goal"),
            "doc": canary(f"{tag}-doc")}
    await ok(await c.post(f"/v1/sessions/s-{tag}/events", headers=bearer(key), json={
        "user_id": user, "events": [{"type": "message", "role": "user",
                                     "content": f"{said['session']} refund timeout notes"}]}),
        201)
    for _ in range(2):
        await ok(await c.put(f"/v1/tasks/task-{tag}/checkpoint", headers=bearer(key), json={
            "user_id": user, "goal": f"{said['goal']} refund timeout"}))
    await ok(await c.post("/v1/knowledge/documents", headers=bearer(key), json={
        "doc_id": f"doc-{tag}", "version": 1, "text": f"{said['doc']} refund timeout notes",
        "sensitivity": "internal", "trust": "reviewed", "acl": {"users": [user]}}), 201)
    return said


async def plant(c: httpx.AsyncClient, container: Container, tenant: str, key: str,
                ops: str) -> dict[str, dict[str, str]]:
    said = {"u": await _plant_user(c, key, U, "u"), "v": await _plant_user(c, key, V, "v")}
    said["shared"] = {"doc": canary("shared-doc")}
    await ok(await c.post("/v1/knowledge/documents", headers=bearer(key), json={
        "doc_id": "doc-uv", "version": 1, "text": f"{said['shared']['doc']} refund timeout",
        "sensitivity": "internal", "trust": "reviewed", "acl": {"users": [U, V]}}), 201)
    said["u"]["memory"], said["v"]["memory"] = canary("u-memory"), canary("v-memory")
    said["shared"]["team"] = canary("team-fact")
    await _memory(container, tenant, "m-u", said["u"]["memory"], level="user", user=U, owner=U)
    await _memory(container, tenant, "m-v", said["v"]["memory"], level="user", user=V, owner=V)
    await _memory(container, tenant, "m-team", said["shared"]["team"], level="team", user=None,
                  owner=U)
    for user, tag in ((U, "u"), (V, "v")):
        await ok(await c.post("/v1/context", headers=bearer(key), json=turn(
            user, f"turn-{tag}", session_id=f"s-{tag}", task_id=f"task-{tag}")))
    # Permission is pushed down into the queries, so a drop record is planted as the
    # guard writes it (a foreign session is a 404, not a drop).
    await container.audit.write(tenant_id=tenant, records=[AuditRecord(
        turn_id="turn-u", kind="dropped.permission.acl", principal="k", ref="kb://doc-x",
        rule="not in the ACL", detail={"kind": "retrieval", "user_id": U})])
    return said


async def wait_finished(c: httpx.AsyncClient, key: str, erasure_id: str) -> dict[str, Any]:
    for _ in range(100):
        got: dict[str, Any] = await ok(await c.get(f"/v1/erasures/{erasure_id}",
                                                   headers=bearer(key)))
        if got["status"] in ("done", "failed"):
            return got
        await asyncio.sleep(0.1)
    raise AssertionError("erasure did not finish")


async def test_forget_me_erases_every_layer_and_keeps_v(
        client: httpx.AsyncClient, container: Container, make_key: KeyMaker, tenant: str,
        worker: None) -> None:
    key, ops, admin = (await make_key(tenant), await make_key(tenant, "ops"),
                       await make_key(tenant, "admin"))
    said = await plant(client, container, tenant, key, ops)
    before = (await client.post("/v1/context", headers=bearer(key), json=turn(
        U, "turn-u-before", session_id="s-u", task_id="task-u"))).text
    assert said["u"]["session"] in before and said["u"]["doc"] in before

    accepted = await ok(await client.post("/v1/erasures", headers=bearer(admin),
                                          json={"user_id": U, "reason": "GDPR art. 17"}), 202)
    assert accepted["status"] == "pending"
    got = await wait_finished(client, ops, accepted["erasure_id"])
    assert got["status"] == "done", got
    receipt, tomb = got["receipt"], tombstone(tenant, U)
    assert got["subject"] == receipt["subject"] == tomb and receipt["verified"] is True
    layers = receipt["layers"]
    assert {k: v["verified_remaining"] for k, v in layers.items()} == dict.fromkeys(layers, 0)
    assert layers["session_archive"]["tables"] == {
        "sessions": 1, "session_events": 1, "session_bundles": 0,
        "session_compactions": 0}
    assert layers["task_checkpoints"]["erased"] == 2
    assert layers["knowledge"]["tables"]["knowledge_documents"] == 1
    assert layers["knowledge"]["tables"]["knowledge_documents_acl"] == 1
    assert layers["memories"]["tables"]["memories"] == 1
    assert layers["memories"]["tables"]["team_memories_tombstoned"] == 1
    assert layers["identity"]["tables"] == {"manifests": 2, "audit_log": 1}
    assert layers["redis_cache"]["tables"]["s:tail"] == 1
    assert layers["redis_cache"]["tables"]["turn:replay"] == 2
    assert "plan" not in receipt and U not in str(got)

    await _after(client, container, tenant, key, ops, said, tomb)


async def _after(c: httpx.AsyncClient, container: Container, tenant: str, key: str, ops: str,
                 said: dict[str, dict[str, str]], tomb: str) -> None:
    u_texts = [said["u"][k] for k in ("session", "goal", "doc", "memory")]
    for user, tag in ((U, "u"), (V, "v")):
        r = await c.post("/v1/context", headers=bearer(key), json=turn(
            user, f"turn-{tag}-after", session_id=f"s-{tag}", task_id=f"task-{tag}"))
        assert r.status_code == 200, r.text
        assert not [t for t in u_texts if t in r.text]
    v_after = r.text
    assert said["v"]["session"] in v_after and said["v"]["doc"] in v_after
    assert said["shared"]["doc"] in v_after  # V still reads the shared document
    assert (await c.get("/v1/sessions/s-u/events?user_id=user-u",
                        headers=bearer(key))).status_code == 404
    for task, user, status in (("task-v", V, 200), ("task-u", U, 404)):
        got = await c.get(f"/v1/tasks/{task}/checkpoint?user_id={user}", headers=bearer(key))
        assert got.status_code == status, got.text
    manifest = await ok(await c.get("/v1/manifests/turn-u", headers=bearer(ops)))
    assert manifest["user_id"] == tomb and manifest["segments"]
    audit = await ok(await c.get("/v1/audit?limit=200", headers=bearer(ops)))
    assert U not in str(audit)
    done = [r for r in audit["records"] if r["kind"] == "erasure.completed"]
    assert done and done[0]["detail"]["subject"] == tomb
    async with container.db.tenant_tx(tenant) as conn:
        team = await conn.fetchval(Sql(
            "SELECT owner FROM memories WHERE tenant_id = :t AND memory_id = 'm-team'"),
            {"t": tenant})
        kept = await conn.fetchval(Sql(
            "SELECT count(*) FROM memories WHERE tenant_id = :t AND user_id = :v"),
            {"t": tenant, "v": V})
    assert team == tomb and kept == 1


async def test_second_request_finds_nothing_and_completes_with_zeros(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, worker: None) -> None:
    admin = await make_key(tenant, "admin")
    first = await ok(await client.post("/v1/erasures", headers=bearer(admin),
                                       json={"user_id": "nobody"}), 202)
    await wait_finished(client, admin, first["erasure_id"])
    again = await ok(await client.post("/v1/erasures", headers=bearer(admin),
                                       json={"user_id": "nobody"}), 202)
    assert again["erasure_id"] != first["erasure_id"]
    got = await wait_finished(client, admin, again["erasure_id"])
    assert got["status"] == "done"
    assert all(v == {"found": 0, "erased": 0, "verified_remaining": 0, "status": "verified",
                     "tables": v["tables"]} for v in got["receipt"]["layers"].values())


async def test_only_admin_may_request_and_ids_are_tenant_scoped(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, other_tenant: str) -> None:
    runtime, ops = await make_key(tenant), await make_key(tenant, "ops")
    admin, other_admin = await make_key(tenant, "admin"), await make_key(other_tenant, "admin")
    for key in (runtime, ops):
        r = await client.post("/v1/erasures", headers=bearer(key), json={"user_id": U})
        assert r.status_code == 403
    created = await ok(await client.post("/v1/erasures", headers=bearer(admin),
                                         json={"user_id": U}), 202)
    dup = await ok(await client.post("/v1/erasures", headers=bearer(admin),
                                     json={"user_id": U}), 202)
    assert dup["erasure_id"] == created["erasure_id"]  # the open job is the answer
    path = f"/v1/erasures/{created['erasure_id']}"
    assert (await client.get(path, headers=bearer(ops))).status_code == 200
    assert (await client.get(path, headers=bearer(runtime))).status_code == 403
    assert (await client.get(path, headers=bearer(other_admin))).status_code == 404
    assert (await client.get("/v1/erasures/er_missing", headers=bearer(ops))).status_code == 404
