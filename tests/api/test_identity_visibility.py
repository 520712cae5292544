"""Signed end-user assertions and session visibility, over the API on the real stores."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, turn

SECRET = "s" * 40


def token(sub: str, groups: list[str], *, key: Any = SECRET, alg: str = "HS256",
          exp_in: int = 300) -> str:
    return jwt.encode({"sub": sub, "groups": groups, "exp": int(time.time()) + exp_in},
                      key, algorithm=alg)


async def require_assertions(client: httpx.AsyncClient, admin: dict[str, str], tenant: str,
                             alg: str = "HS256", key: str = SECRET) -> httpx.Response:
    return await client.put(f"/v1/admin/tenants/{tenant}/identity", headers=admin,
                            json={"algorithm": alg, "key": key, "require_assertion": True})


def asserted(key: str, tok: str) -> dict[str, str]:
    return {**bearer(key), "X-Ctxgate-User-Assertion": tok}


async def test_required_assertion_decides_user_and_groups(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        admin_headers: dict[str, str]) -> None:
    key = await make_key(tenant)
    await ingest(client, key, "hr-doc", "refund timeout bonus pool", acl={"groups": ["hr"]})
    assert (await require_assertions(client, admin_headers, tenant)).status_code == 204

    missing = await client.post("/v1/context", headers=bearer(key), json=turn())
    assert missing.status_code == 401
    ok = await client.post("/v1/context", headers=asserted(key, token("alice", ["hr"])),
                           json=turn(groups=[]))
    assert ok.status_code == 200, ok.text
    assert "kb://hr-doc" in ok.text  # the group came from the signed token
    other_user = await client.post("/v1/context", headers=asserted(key, token("bob", [])),
                                   json=turn(groups=[]))
    assert other_user.status_code == 403
    widened = await client.post("/v1/context", headers=asserted(key, token("alice", [])),
                                json=turn(groups=["hr"]))
    assert widened.status_code == 403
    writes = await client.post("/v1/sessions/s1/events", headers=bearer(key), json={
        "user_id": "alice", "events": [{"type": "message", "role": "user", "content": "x"}]})
    assert writes.status_code == 401


@pytest.mark.parametrize("bad", [
    "not-a-jwt", "a.b.c", token("alice", [], exp_in=-3600),
    token("alice", [], key="k" * 40), "x" * 20_000,
    jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, "groups": "hr"}, SECRET),
])
async def test_bad_assertions_are_401_never_500(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        admin_headers: dict[str, str], bad: str) -> None:
    key = await make_key(tenant)
    await require_assertions(client, admin_headers, tenant)
    r = await client.post("/v1/context", headers=asserted(key, bad), json=turn())
    assert r.status_code == 401
    assert r.json()["type"] == "unauthorized"
    assert bad[:20] not in r.json()["detail"]


async def test_rs256_assertions(client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
                                admin_headers: dict[str, str]) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    key = await make_key(tenant)
    assert (await require_assertions(client, admin_headers, tenant, "RS256", public_pem)
            ).status_code == 204
    good = token("alice", [], key=private, alg="RS256")
    r = await client.post("/v1/context", headers=asserted(key, good), json=turn(groups=[]))
    assert r.status_code == 200
    forged = token("alice", [], alg="HS256", key=public_pem[:64])
    assert (await client.post("/v1/context", headers=asserted(key, forged),
                              json=turn(groups=[]))).status_code == 401


@pytest.mark.parametrize(("alg", "material"), [("HS256", "short"), ("RS256", "not a pem")])
async def test_unusable_identity_keys_are_422(client: httpx.AsyncClient, tenant: str,
                                              admin_headers: dict[str, str], alg: str,
                                              material: str) -> None:
    r = await require_assertions(client, admin_headers, tenant, alg, material)
    assert r.status_code == 422
    assert r.json()["type"] == "invalid-request"


async def _sessions(client: httpx.AsyncClient, key: str) -> None:
    layout = [("root", "alice", None, "agent1"), ("child", "alice", "root", "agent1"),
              ("sibling", "alice", None, "agent1"), ("elsewhere", "alice", None, "agent2"),
              ("bobs", "bob", None, "agent1")]
    for sid, user, parent, agent in layout:
        r = await client.post(f"/v1/sessions/{sid}/events", headers=bearer(key), json={
            "user_id": user, "agent_id": agent, "parent_session_id": parent,
            "events": [{"type": "message", "role": "user",
                        "content": f"gateway timeout notes from {sid}"}]})
        assert r.status_code == 201, r.text


@pytest.mark.parametrize(("visibility", "expected"), [
    ("self", {"root"}), ("tree", {"root", "child"}),
    ("agent", {"root", "child", "sibling"}),
    ("all", {"root", "child", "sibling", "elsewhere"}),
])
async def test_transcript_search_follows_visibility(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, visibility: str,
        expected: set[str]) -> None:
    key = await make_key(tenant, max_session_visibility="all")
    await _sessions(client, key)
    r = await client.get(f"/v1/sessions/root/search?user_id=alice&q=gateway%20timeout"
                         f"&visibility={visibility}", headers=bearer(key))
    assert r.status_code == 200, r.text
    assert {h["session_id"] for h in r.json()["hits"]} == expected  # never bob's


async def test_visibility_is_capped_by_the_key(client: httpx.AsyncClient, make_key: KeyMaker,
                                               tenant: str) -> None:
    key = await make_key(tenant, max_session_visibility="self")
    await _sessions(client, key)
    r = await client.get("/v1/sessions/root/search?user_id=alice&q=timeout&visibility=tree",
                         headers=bearer(key))
    assert r.status_code == 403
    r = await client.post("/v1/context", headers=bearer(key),
                          json=turn(session_id="root", session_visibility="all"))
    assert r.status_code == 403
    r = await client.get("/v1/sessions/root/search?user_id=bob&q=timeout&visibility=self",
                         headers=bearer(key))
    assert r.status_code == 404  # bob does not own root


async def test_turn_recalls_spawned_sessions_but_not_siblings(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await _sessions(client, key)
    r = await client.post("/v1/context", headers=bearer(key),
                          json=turn(session_id="root", query="gateway timeout notes"))
    assert r.status_code == 200
    refs = {s["ref"] for s in r.json()["envelope"]["segments"]}
    assert "session://child/events/1" in refs
    assert not any(ref.startswith(("session://sibling", "session://bobs")) for ref in refs)
