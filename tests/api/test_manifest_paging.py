"""GET /v1/manifests pages by an opaque keyset cursor, with a runtime key's visibility in SQL.

Many turns share one timestamp (written directly, as a burst within one millisecond would be)
and two runtime keys of one tenant made them: paging through with either key returns each of
its own turns exactly once, in full pages, and none of the other key's.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from app.main import Container
from app.ports import StoredManifest
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

TURNS = 41  # per key: 41 = 5 full pages of 8 and one of 1
PAGE = 8


async def _key(client: httpx.AsyncClient, admin: dict[str, str], tenant: str,
               role: str = "runtime") -> tuple[str, str]:
    r = await client.post("/v1/admin/keys", headers=admin, json={
        "tenant_id": tenant, "role": role, "max_data_level": "confidential"})
    assert r.status_code == 201, r.text
    return str(r.json()["key_id"]), str(r.json()["api_key"])


async def _page_through(client: httpx.AsyncClient, key: str, **params: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        q = {"limit": PAGE, **params, **({"cursor": cursor} if cursor else {})}
        r = await client.get("/v1/manifests", headers=bearer(key), params=q)
        assert r.status_code == 200, r.text
        body = r.json()
        pages.append([m["turn_id"] for m in body["manifests"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


@pytest.fixture
async def burst(client: httpx.AsyncClient, container: Container, admin_headers: dict[str, str],
                tenant: str) -> dict[str, Any]:
    """Two runtime keys' turns, interleaved, all stamped with the same instant."""
    (a_id, a_key), (b_id, b_key) = (await _key(client, admin_headers, tenant),
                                    await _key(client, admin_headers, tenant))
    r = await client.post("/v1/context", headers=bearer(a_key), json=turn(turn_id="seed-turn"))
    assert r.status_code == 200, r.text
    body = r.json()["manifest"]
    mine: dict[str, list[str]] = {a_id: ["seed-turn"], b_id: []}
    for i in range(2 * TURNS - 1):
        key_id = b_id if i % 2 == 0 else a_id
        turn_id = f"burst-{i:03d}"
        written = await container.manifests.insert(
            tenant_id=tenant, audit=[], manifest=StoredManifest(
                turn_id=turn_id, key_id=key_id, request_sha256="x" * 64,
                body={**body, "turn_id": turn_id, "created_at": "2026-12-04T12:00:00.123+00:00"}))
        assert written.existing is None
        mine[key_id].append(turn_id)
    return {"a": (a_key, mine[a_id]), "b": (b_key, mine[b_id])}


async def test_each_key_pages_through_its_own_same_instant_turns_exactly_once(
        client: httpx.AsyncClient, burst: dict[str, Any]) -> None:
    for name in ("a", "b"):
        key, own = burst[name]
        assert len(own) == TURNS
        pages = await _page_through(client, key)
        assert [len(p) for p in pages] == [PAGE] * (TURNS // PAGE) + [TURNS % PAGE]
        seen = [t for p in pages for t in p]
        assert sorted(seen) == sorted(own)  # every own turn, exactly once, no other key's


async def test_ops_pages_through_the_whole_tenant(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        burst: dict[str, Any]) -> None:
    ops = await make_key(tenant, role="ops")
    seen = [t for p in await _page_through(client, ops, limit=200) for t in p]
    assert sorted(seen) == sorted(burst["a"][1] + burst["b"][1])
    # Newest first, ties by turn id descending: the seed turn is older or newer than all.
    burst_only = [t for t in seen if t.startswith("burst-")]
    assert burst_only == sorted(burst_only, reverse=True)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize("cursor", [
    "not a cursor", "%%%", "", "A" * 2000, _b64(b"not json"), _b64(b"[]"),
    _b64(b'{"v":2,"at":"2026-12-04T12:00:00+00:00","id":"t"}'),
    _b64(b'{"v":1,"at":"yesterday","id":"t"}'),
    _b64(b'{"v":1,"at":"2026-12-04T12:00:00","id":"t"}'),  # no time zone
    _b64(b'{"v":1,"at":"0001-01-01T00:00:00+14:00","id":"t"}'),  # before year 1 in UTC
    _b64(b'{"v":1,"at":"2026-12-04T12:00:00+00:00","id":"t\\u0000"}'),
    _b64(b'{"v":1,"at":"2026-12-04T12:00:00+00:00","id":7}'),
    _b64(b'{"v":1,"at":"2026-12-04T12:00:00+00:00"}'),
])
async def test_a_cursor_it_did_not_issue_is_a_422_invalid_cursor(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, cursor: str) -> None:
    key = await make_key(tenant)
    r = await client.get("/v1/manifests", headers=bearer(key), params={"cursor": cursor})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["type"] == "invalid-cursor"
