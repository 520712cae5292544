"""Values PostgreSQL cannot hold are a 4xx at the edge, never a 500 from the store.

Found by the isolation suite's null-byte and oversized-value tricks: at commit cf92dce each of
these requests was a 500 (NUL in text or jsonb, integers past int32, instants past year 9999
UTC). None of them leaked data; they broke "never 500". Kept as regression cases.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.main import Container, create_app
from app.settings import Settings
from tests.isolation.plant import bearer, doc_body

INT32_OVERFLOW = 2**31
FAR_FUTURE = "9999-12-31T23:59:59-14:00"  # a valid ISO 8601 instant after 9999-12-31 UTC


@dataclass
class Api:
    client: httpx.AsyncClient
    runtime: dict[str, str]
    ops: dict[str, str]


@pytest.fixture(scope="module")
async def api(pg_owner_url: str, redis_url: str) -> AsyncIterator[Api]:
    uid = uuid.uuid4().hex[:10]
    settings = Settings(database_url=pg_owner_url, redis_url=redis_url,
                        redis_prefix=f"ctxgate-iso-bugs-{uid}", admin_token=f"adm-{uid}",
                        db_pool_size=2)
    container = await Container.open(settings)
    transport = httpx.ASGITransport(app=create_app(container=container),
                                    raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        keys = {}
        for role in ("runtime", "ops"):
            r = await client.post("/v1/admin/keys", headers=bearer(f"adm-{uid}"),
                                  json={"tenant_id": f"iso-bugs-{uid}", "role": role})
            keys[role] = bearer(r.json()["api_key"])
        api = Api(client, keys["runtime"], keys["ops"])
        r = await client.post("/v1/sessions/s1/events", headers=api.runtime, json={
            "user_id": "alice", "events": [{"type": "message", "role": "user", "content": "x"}]})
        assert r.status_code == 201, r.text
        r = await client.put("/v1/tasks/t1/checkpoint", headers=api.runtime,
                             json={"user_id": "alice", "goal": "g"})
        assert r.status_code == 200, r.text
        yield api
    await container.close()


NUL_EVENT = {"user_id": "alice",
             "events": [{"type": "message", "role": "user", "content": "a\x00b"}]}
BUGS: list[tuple[str, str, str, str, dict[str, Any]]] = [
    # (id, role, method, path, request kwargs)
    ("event-content-null-byte", "runtime", "POST", "/v1/sessions/s1/events",
     {"json": NUL_EVENT}),
    ("checkpoint-goal-null-byte", "runtime", "PUT", "/v1/tasks/t1/checkpoint",
     {"json": {"user_id": "alice", "goal": "g\x00"}}),
    ("document-text-null-byte", "runtime", "POST", "/v1/knowledge/documents",
     {"json": doc_body("d-nul", "a\x00b")}),
    ("document-title-null-byte", "runtime", "POST", "/v1/knowledge/documents",
     {"json": doc_body("d-nul-title", "ab", title="t\x00")}),
    ("events-after-seq-int32-overflow", "runtime", "GET", "/v1/sessions/s1/events",
     {"params": {"user_id": "alice", "after_seq": INT32_OVERFLOW}}),
    ("checkpoint-revision-int32-overflow", "runtime", "GET", "/v1/tasks/t1/checkpoint",
     {"params": {"revision": INT32_OVERFLOW}}),
    ("checkpoint-expected-revision-int32-overflow", "runtime", "PUT", "/v1/tasks/t1/checkpoint",
     {"json": {"user_id": "alice", "goal": "g", "expected_revision": INT32_OVERFLOW}}),
    ("manifests-before-after-year-9999", "ops", "GET", "/v1/manifests",
     {"params": {"before": FAR_FUTURE}}),
    ("document-expires-after-year-9999", "runtime", "POST", "/v1/knowledge/documents",
     {"json": doc_body("d-far", "ab", expires_at=FAR_FUTURE)}),
    ("document-observed-after-year-9999", "runtime", "POST", "/v1/knowledge/documents",
     {"json": doc_body("d-far-obs", "ab", observed_at=FAR_FUTURE)}),
    ("event-tool-arguments-null-byte", "runtime", "POST", "/v1/sessions/s1/events",
     {"json": {"user_id": "alice", "events": [
         {"type": "tool_call", "call_id": "c1", "name": "n", "arguments": {"q": "a\x00"}}]}}),
]


@pytest.mark.parametrize(("role", "method", "path", "kwargs"),
                         [pytest.param(*b[1:], id=b[0]) for b in BUGS])
async def test_a_value_the_store_cannot_hold_is_4xx(
        api: Api, role: str, method: str, path: str, kwargs: dict[str, Any]) -> None:
    headers = api.runtime if role == "runtime" else api.ops
    r = await api.client.request(method, path, headers=headers, **kwargs)
    assert 400 <= r.status_code < 500, f"{r.status_code}: {r.text[:200]}"


async def test_the_same_requests_without_the_bad_value_succeed(api: Api) -> None:
    """The control for the cases above: only the bad value makes them fail."""
    c = api.client
    ok = [
        await c.post("/v1/sessions/s1/events", headers=api.runtime, json={
            "user_id": "alice", "events": [{"type": "message", "role": "user", "content": "ab"}]}),
        await c.put("/v1/tasks/t1/checkpoint", headers=api.runtime,
                    json={"user_id": "alice", "goal": "g"}),
        await c.post("/v1/knowledge/documents", headers=api.runtime,
                     json=doc_body("d-ok", "ab", title="t")),
        await c.get("/v1/sessions/s1/events", headers=api.runtime,
                    params={"user_id": "alice", "after_seq": INT32_OVERFLOW - 1}),
        await c.get("/v1/manifests", headers=api.ops, params={"before": "9999-12-31T00:00:00Z"}),
    ]
    assert [r.status_code for r in ok] == [201, 200, 201, 200, 200], [r.text for r in ok]
