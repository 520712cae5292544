"""Leakage canaries on live turns, over the real stores: the operator registers planted
strings; a turn whose envelope holds one outside its owner counts, audits (ids only) and
logs it; the owner's own turns count nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.adapters.postgres.db import Sql
from app.main import Container
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, turn

PLANTED = "The refund call times out after 30 s; escalation code {code} for the on-call."


@pytest.fixture
def canary(uid: str) -> str:
    # One text per test: the registry is platform-wide, so another test's canary of the same
    # text (another tenant) would be a leak here too.
    return f"NIGHTJAR-{uid}"


def hits(container: Container, kind: str) -> float:
    value: float = container.metrics.leakage_canary_hits.labels(kind=kind)._value.get()
    return value


async def register(c: httpx.AsyncClient, admin: dict[str, str], tenant: str, text: str,
                   **extra: Any) -> str:
    r = await c.post("/v1/admin/canaries", headers=admin,
                     json={"tenant_id": tenant, "label": "refund runbook", "text": text,
                           **extra})
    assert r.status_code == 201, r.text
    assert r.json()["text"] == text and r.json()["created_by"] == "platform"
    return str(r.json()["canary_id"])


async def context(c: httpx.AsyncClient, key: str, turn_id: str, **extra: Any) -> str:
    r = await c.post("/v1/context", headers=bearer(key), json=turn(turn_id=turn_id, **extra))
    assert r.status_code == 200, r.text
    return r.text


async def canary_audit(c: httpx.AsyncClient, ops: str, turn_id: str
                       ) -> tuple[str, list[dict[str, Any]]]:
    r = await c.get("/v1/audit", params={"turn_id": turn_id}, headers=bearer(ops))
    assert r.status_code == 200, r.text
    return r.text, [x for x in r.json()["records"] if x["kind"] == "leakage.canary"]


@pytest.fixture
async def keys(make_key: KeyMaker, tenant: str, other_tenant: str) -> dict[str, str]:
    return {"a": await make_key(tenant), "a_ops": await make_key(tenant, "ops"),
            "b": await make_key(other_tenant), "b_ops": await make_key(other_tenant, "ops")}


async def test_owner_sees_its_canary_and_nothing_counts(
        client: httpx.AsyncClient, admin_headers: dict[str, str], container: Container,
        keys: dict[str, str], tenant: str, canary: str) -> None:
    await register(client, admin_headers, tenant, canary)
    await ingest(client, keys["a"], "runbook", PLANTED.format(code=canary))
    before = hits(container, "cross_tenant"), hits(container, "cross_user")
    body = await context(client, keys["a"], "turn-own")
    assert canary in body  # the owner's own data: no leak, not withheld
    assert (hits(container, "cross_tenant"), hits(container, "cross_user")) == before
    assert (await canary_audit(client, keys["a_ops"], "turn-own"))[1] == []


async def test_canary_in_another_tenants_envelope_is_a_cross_tenant_leak(
        client: httpx.AsyncClient, admin_headers: dict[str, str], container: Container,
        keys: dict[str, str], tenant: str, canary: str,
        caplog: pytest.LogCaptureFixture) -> None:
    canary_id = await register(client, admin_headers, tenant, canary)
    await ingest(client, keys["a"], "runbook", PLANTED.format(code=canary))
    # The leak path, simulated: A's planted string shows up in B's data.
    await ingest(client, keys["b"], "copied", PLANTED.format(code=canary))
    before = hits(container, "cross_tenant")
    await context(client, keys["b"], "turn-leak")
    assert hits(container, "cross_tenant") == before + 1
    text, records = await canary_audit(client, keys["b_ops"], "turn-leak")
    assert len(records) == 1
    assert records[0]["detail"]["canary_id"] == canary_id
    assert records[0]["detail"]["kind"] == "cross_tenant"
    assert records[0]["ref"].startswith("kb://copied")
    assert canary not in text and tenant not in text  # ids only, never the owner's tenant
    warnings = [r.getMessage() for r in caplog.records if "leakage canary" in r.getMessage()]
    assert warnings and all(canary not in w for w in warnings)
    # Deleting the canary stops the detection.
    r = await client.delete(f"/v1/admin/canaries/{canary_id}", headers=admin_headers)
    assert r.status_code == 204
    await context(client, keys["b"], "turn-after-delete")
    assert hits(container, "cross_tenant") == before + 1
    assert (await client.delete(f"/v1/admin/canaries/{canary_id}", headers=admin_headers)
            ).status_code == 404


async def test_user_canary_seen_by_another_user_is_a_cross_user_leak(
        client: httpx.AsyncClient, admin_headers: dict[str, str], container: Container,
        keys: dict[str, str], tenant: str, uid: str) -> None:
    alices = f"KESTREL-{uid}-ALICE"
    canary_id = await register(client, admin_headers, tenant, alices, user_id="alice")
    # Alice's private string, simulated as leaked into a tenant-wide document.
    await ingest(client, keys["a"], "shared", PLANTED.format(code=alices))
    before = hits(container, "cross_user")
    await context(client, keys["a"], "turn-alice")  # alice herself: no leak
    assert hits(container, "cross_user") == before
    await context(client, keys["a"], "turn-bob", user_id="bob")
    assert hits(container, "cross_user") == before + 1
    _, records = await canary_audit(client, keys["a_ops"], "turn-bob")
    assert [(x["detail"]["canary_id"], x["rule"]) for x in records] == [
        (canary_id, "cross_user")]


async def test_canary_admin_list_auth_and_bad_input(
        client: httpx.AsyncClient, admin_headers: dict[str, str], keys: dict[str, str],
        tenant: str, other_tenant: str, canary: str, uid: str) -> None:
    mine = await register(client, admin_headers, tenant, canary)
    theirs = await register(client, admin_headers, other_tenant, f"ORIOLE-{uid}-B")
    r = await client.get("/v1/admin/canaries", headers=admin_headers,
                         params={"tenant_id": tenant})
    assert r.status_code == 200 and [x["canary_id"] for x in r.json()["canaries"]] == [mine]
    r = await client.get("/v1/admin/canaries", headers=admin_headers)
    assert {mine, theirs} <= {x["canary_id"] for x in r.json()["canaries"]}
    for key in (keys["a"], "cgk_nope"):  # a tenant key is not the platform token
        for r in (await client.get("/v1/admin/canaries", headers=bearer(key)),
                  await client.post("/v1/admin/canaries", headers=bearer(key),
                                    json={"tenant_id": tenant, "text": canary}),
                  await client.delete(f"/v1/admin/canaries/{mine}", headers=bearer(key))):
            assert r.status_code == 401, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            assert canary not in r.text
    for bad in ({"tenant_id": tenant, "text": "refund"},  # a common word is no canary
                {"tenant_id": tenant, "text": " " + canary},
                {"tenant_id": tenant, "text": "X" * 257},
                {"tenant_id": tenant, "text": "NIGHT\x00JAR-1"},
                {"text": canary},
                {"tenant_id": tenant, "text": canary, "extra": 1}):
        r = await client.post("/v1/admin/canaries", headers=admin_headers, json=bad)
        assert r.status_code == 422, (bad, r.text)
    assert (await client.delete("/v1/admin/canaries/cnr_missing", headers=admin_headers)
            ).status_code == 404


async def test_the_service_role_cannot_read_the_table_directly(container: Container) -> None:
    """Only the SECURITY DEFINER functions read canaries: no session of the app role, tenant
    scoped or not, can select the table."""
    with pytest.raises(Exception, match="permission denied"):
        async with container.db.unscoped_tx() as conn:
            await conn.fetchval(Sql("SELECT count(*) FROM leakage_canaries"))
