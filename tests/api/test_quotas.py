"""Per-tenant quotas through the API on the real stores: a tenant past its rate gets 429
quota-exceeded with Retry-After and RateLimit headers while another tenant's turns are served;
a tenant's own limits come from its settings; a tenant flooding with concurrent turns leaves
the others their share (and, with no cap, the control run shows the starvation it prevents);
with Redis unreachable the limiter lets requests through."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from app.adapters.redis.client import open_redis
from app.adapters.redis.quotas import RedisRateLimiter
from app.main import Container, create_app
from app.service.quotas import Quotas
from app.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

EMBEDDING = [0.05] * 384  # the client's: no model call, so a turn is the stores' work


def cheap_turn() -> dict[str, Any]:
    return turn(query_embedding=EMBEDDING)  # a server-made turn_id: a new turn each time


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # Rates slow enough that no token comes back while a test runs.
    return settings.model_copy(update={"quota_requests_per_s": 0.05,
                                       "quota_requests_burst": 3})


async def test_a_tenant_past_its_rate_gets_429_while_another_is_served(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, other_tenant: str,
        container: Container) -> None:
    a, b = await make_key(tenant), await make_key(other_tenant)
    served = [await client.post("/v1/context", headers=bearer(a), json=cheap_turn())
              for _ in range(3)]
    assert [r.status_code for r in served] == [200] * 3, served[-1].text
    assert served[0].headers["RateLimit-Policy"] == '"tenant_rate";q=3;w=60'
    assert served[-1].headers["RateLimit"].startswith('"tenant_rate";r=0;')
    refused = await client.post("/v1/context", headers=bearer(a), json=cheap_turn())
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "quota-exceeded"
    assert 1 <= int(refused.headers["Retry-After"]) <= 20  # one token at 0.05/s
    assert refused.headers["RateLimit"] == (
        f'"tenant_rate";r=0;t={refused.headers["Retry-After"]}')
    # Tenant B's own bucket is untouched by A's excess.
    for _ in range(3):
        r = await client.post("/v1/context", headers=bearer(b), json=cheap_turn())
        assert r.status_code == 200, r.text
    rejections = container.metrics.quota_rejections.labels(limit="tenant_rate")
    assert rejections._value.get() == 1


async def test_a_tenants_settings_set_its_own_limits(
        client: httpx.AsyncClient, make_key: KeyMaker, admin_headers: dict[str, str],
        tenant: str, other_tenant: str) -> None:
    a, b = await make_key(tenant), await make_key(other_tenant)
    r = await client.put(f"/v1/admin/tenants/{tenant}/settings", headers=admin_headers, json={
        "quota_requests_per_s": 0.01, "quota_requests_burst": 1, "quota_turns_concurrent": 2})
    assert r.status_code == 204, r.text
    got = await client.get(f"/v1/admin/tenants/{tenant}/settings", headers=admin_headers)
    assert got.json() == {"default_session_visibility": "tree",
                          "quota_requests_per_s": 0.01, "quota_requests_burst": 1,
                          "quota_key_requests_per_s": None, "quota_turns_concurrent": 2,
                          "bundle_release_gate": "lint"}
    assert (await client.get("/v1/manifests", headers=bearer(a))).status_code == 200
    again = await client.get("/v1/manifests", headers=bearer(a))
    assert again.status_code == 429 and again.json()["type"] == "quota-exceeded"
    for _ in range(2):  # B keeps the server's default (3)
        assert (await client.get("/v1/manifests", headers=bearer(b))).status_code == 200
    r = await client.put(f"/v1/admin/tenants/{tenant}/settings", headers=admin_headers,
                         json={"quota_requests_burst": 0})
    assert r.status_code == 422  # a bucket holds at least one request


async def test_a_key_past_its_own_rate_leaves_the_tenants_other_keys_served(
        client: httpx.AsyncClient, make_key: KeyMaker, admin_headers: dict[str, str],
        tenant: str) -> None:
    r = await client.put(f"/v1/admin/tenants/{tenant}/settings", headers=admin_headers, json={
        "quota_requests_per_s": 10, "quota_requests_burst": 10,
        "quota_key_requests_per_s": 0.01})  # each key's bucket: 1 request (1 s worth)
    assert r.status_code == 204, r.text
    runaway, steady = await make_key(tenant), await make_key(tenant)
    assert (await client.get("/v1/manifests", headers=bearer(runaway))).status_code == 200
    refused = await client.get("/v1/manifests", headers=bearer(runaway))
    assert refused.status_code == 429
    assert refused.headers["RateLimit-Policy"] == '"key_rate";q=1;w=100'
    served = await client.get("/v1/manifests", headers=bearer(steady))
    assert served.status_code == 200
    assert served.headers["RateLimit"].startswith('"tenant_rate";r=8;')  # the refusal took none


async def test_with_redis_unreachable_requests_go_through_and_are_counted(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    dead = open_redis("redis://127.0.0.1:1/0")  # nothing listens on port 1
    healthy = container.quotas
    container.quotas = Quotas(
        RedisRateLimiter(dead, prefix="dead"), defaults=healthy._defaults, pool_size=20,
        lease_ttl_s=60, timeout_s=0.25, metrics=container.metrics)
    try:
        answers = [await client.post("/v1/context", headers=bearer(key), json=cheap_turn())
                   for _ in range(5)]  # past the burst of 3: no bucket to refuse it
    finally:
        container.quotas = healthy
        await dead.aclose()
    assert [r.status_code for r in answers] == [200] * 5, answers[-1].text
    assert "RateLimit" not in answers[0].headers
    assert "redis" in answers[0].json()["manifest"]["degraded"]
    assert container.metrics.quota_unavailable._value.get() == 10  # a bucket and a lease each


FLOOD_WORKERS = 16
B_TURNS = 12


async def flood(settings: Settings, *, turns_cap: int, make: Any) -> dict[str, Any]:
    """Tenant A keeps FLOOD_WORKERS turns in flight (a worker refused waits 10 ms, not
    Retry-After) while tenant B runs B_TURNS turns one after another; B's outcomes."""
    conf = settings.model_copy(update={
        "quota_requests_per_s": 0.0, "quota_turns_concurrent": turns_cap,
        "turns_in_flight_max": 4, "turns_admission_wait_ms": 50})
    container = await Container.open(conf)
    try:
        transport = httpx.ASGITransport(app=create_app(container=container))
        async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                     timeout=60) as client:
            a, b = await make(client, conf, "a"), await make(client, conf, "b")
            done = asyncio.Event()
            a_status: Counter[int] = Counter()

            async def flooder() -> None:
                while not done.is_set():
                    r = await client.post("/v1/context", headers=bearer(a), json=cheap_turn())
                    a_status[r.status_code] += 1
                    if r.status_code != 200:
                        await asyncio.sleep(0.01)

            workers = [asyncio.create_task(flooder()) for _ in range(FLOOD_WORKERS)]
            await asyncio.sleep(0.5)  # A's flood is running before B's first turn
            b_status: Counter[int] = Counter()
            b_ms: list[float] = []
            for _ in range(B_TURNS):
                start = time.perf_counter()
                r = await client.post("/v1/context", headers=bearer(b), json=cheap_turn())
                b_ms.append((time.perf_counter() - start) * 1000)
                b_status[r.status_code] += 1
            done.set()
            await asyncio.gather(*workers)
    finally:
        await container.close()
    ordered = sorted(b_ms)
    return {"a": dict(a_status), "b": dict(b_status),
            "b_p50_ms": round(statistics.median(ordered), 1),
            "b_max_ms": round(ordered[-1], 1)}


async def test_a_tenant_flooding_with_turns_leaves_another_its_share(
        settings: Settings, tenant: str, other_tenant: str) -> None:
    async def make(client: httpx.AsyncClient, conf: Settings, which: str) -> str:
        assert conf.admin_token is not None
        r = await client.post("/v1/admin/keys", headers=bearer(
            conf.admin_token.get_secret_value()), json={
            "tenant_id": tenant if which == "a" else other_tenant, "role": "runtime",
            "max_data_level": "confidential"})
        return str(r.json()["api_key"])

    capped = await flood(settings, turns_cap=2, make=make)
    print("capped (A at most 2 turns in flight; 4 per worker):", capped)
    # B's turns are all served: A holds at most 2 of the worker's 4 slots, its excess is 429.
    assert capped["b"] == {200: B_TURNS}
    assert capped["a"].get(429, 0) > 0 and 503 not in capped["a"]
    assert set(capped["a"]) <= {200, 429}

    control = await flood(settings, turns_cap=0, make=make)
    print("control (no cap):", control)
    # Without the cap nothing of A's is refused as a quota: the 429s above are the cap's. Whether
    # B is then shed (503) depends on how fast the machine drains A's flood: under load it is
    # (seen: 10-11 of 12), on a quiet machine not always, so it is printed, not asserted.
    assert 429 not in control["a"]
