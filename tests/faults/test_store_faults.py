"""Dependency faults on real processes (issue 19, items 1-2): Redis killed mid-session costs
latency, not availability; PostgreSQL killed is a 503 naming it, never a 500, and the service
recovers when it is back. Each test owns the process it kills (tests/faults/servers.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from app.main import Container, create_app
from app.settings import Settings
from tests.api.conftest import bearer
from tests.faults.servers import OwnPostgres, OwnRedis

Client = httpx.AsyncClient


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    server = OwnRedis()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    server.start()
    server.migrate()
    yield server
    server.stop()


async def _client(settings: Settings) -> AsyncIterator[tuple[Client, Container]]:
    container = await Container.open(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(container=container))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            yield c, container
    finally:
        await container.close()


async def _key(client: Client, container: Container, tenant: str) -> str:
    assert container.settings.admin_token is not None
    admin = {"Authorization": f"Bearer {container.settings.admin_token.get_secret_value()}"}
    r = await client.post("/v1/admin/keys", headers=admin, json={
        "tenant_id": tenant, "role": "runtime", "max_data_level": "internal"})
    assert r.status_code == 201, r.text
    return str(r.json()["api_key"])


async def _append(client: Client, key: str, *texts: str) -> httpx.Response:
    return await client.post("/v1/sessions/s1/events", headers=bearer(key), json={
        "user_id": "alice",
        "events": [{"type": "message", "role": "user", "content": t} for t in texts]})


async def _turn(client: Client, key: str, **extra: Any) -> httpx.Response:
    return await client.post("/v1/context", headers=bearer(key), json={
        "user_id": "alice", "session_id": "s1", "query": "where is the invoice?",
        "data_level": "internal", "budget": {"max_tokens": 4000, "reserve_output": 500},
        **extra})


def _faults(container: Container, dependency: str) -> float:
    """ctxgate_dependency_errors_total of ``dependency``, over every kind."""
    return sum(s.value for family in container.metrics.registry.collect()
               for s in family.samples if s.name == "ctxgate_dependency_errors_total"
               and s.labels["dependency"] == dependency)


async def test_a_dead_redis_degrades_turns_instead_of_failing_them(
        settings: Settings, own_redis: OwnRedis, tenant: str) -> None:
    async for client, container in _client(dataclasses.replace(
            settings, redis_url=own_redis.url) if dataclasses.is_dataclass(settings)
            else settings.model_copy(update={"redis_url": own_redis.url})):
        key = await _key(client, container, tenant)
        assert (await _append(client, key, "the invoice is in the blue folder")).status_code \
            == 201
        healthy = await _turn(client, key)
        assert healthy.status_code == 200, healthy.text
        assert healthy.json()["manifest"]["degraded"] == []

        own_redis.kill()
        # Appends stay durable (the archive is the truth) and are acknowledged.
        assert (await _append(client, key, "moved it to the green folder")).status_code \
            == 201
        turns = [await _turn(client, key, turn_id=f"turn-{i}") for i in range(5)]
        assert [t.status_code for t in turns] == [200] * 5, turns[-1].text
        for t in turns:
            manifest = t.json()["manifest"]
            assert manifest["degraded"] == ["redis"]
        # The history was read from the archive: the event appended during the outage is in.
        assert "green folder" in turns[-1].text
        # Every degraded turn counted its Redis faults by kind (the tail read, at least).
        assert _faults(container, "redis") >= 5 and _faults(container, "postgres") == 0
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["redis"] is False

        own_redis.start()  # same port: the pool reconnects on its next command
        for _ in range(20):
            again = await _turn(client, key)
            if again.json()["manifest"]["degraded"] == []:
                break
            await asyncio.sleep(0.1)
        assert again.status_code == 200 and again.json()["manifest"]["degraded"] == []
        assert "green folder" in again.text


async def test_a_dead_postgres_is_a_503_naming_it_and_recovery_needs_no_restart(
        settings: Settings, own_postgres: OwnPostgres, tenant: str) -> None:
    async for client, container in _client(settings.model_copy(
            update={"database_url": own_postgres.url})):
        key = await _key(client, container, tenant)
        assert (await _append(client, key, "the invoice is in the blue folder")).status_code \
            == 201
        assert (await _turn(client, key)).status_code == 200

        own_postgres.kill()
        for response in (await _turn(client, key), await _append(client, key, "lost?"),
                         await client.get("/v1/sessions/s1/events?user_id=alice",
                                          headers=bearer(key))):
            assert response.status_code == 503, response.text
            problem = response.json()
            assert problem["type"] == "dependency-unavailable"
            assert problem["dependency"] == "postgres"
            assert response.headers["content-type"] == "application/problem+json"
            assert int(response.headers["Retry-After"]) >= 1
        assert _faults(container, "postgres") >= 3  # one per refused request, by kind

        own_postgres.restart()
        for _ in range(50):
            back = await _turn(client, key)
            if back.status_code == 200:
                break
            assert back.status_code == 503, back.text
            await asyncio.sleep(0.2)
        assert back.status_code == 200, back.text
        assert "blue folder" in back.text
        events = await client.get("/v1/sessions/s1/events?user_id=alice", headers=bearer(key))
        # The append refused during the outage was never acknowledged, and is not there.
        assert [e["content"] for e in events.json()["events"]] == [
            "the invoice is in the blue folder"]


async def test_an_erasure_receipt_never_claims_what_it_could_not_check(
        settings: Settings, own_redis: OwnRedis, tenant: str) -> None:
    """Redis hangs during the job: the PostgreSQL layers are erased and verified, the job stays
    open with redis_cache 'unreachable' and verified false; once Redis answers again the
    same job erases the cached tail it still holds and only then says verified."""
    async for client, container in _client(settings.model_copy(
            update={"redis_url": own_redis.url})):
        key = await _key(client, container, tenant)
        assert container.settings.admin_token is not None
        admin = await _admin_key(client, container, tenant)
        assert (await _append(client, key, "CANARY my IBAN is DE89 3704 0044 0532 0130 00")
                ).status_code == 201
        assert (await _turn(client, key)).status_code == 200  # the tail is cached in Redis
        prefix = f"{container.settings.redis_prefix}:*"
        assert await _redis_keys(own_redis, prefix)

        container.erasure_worker.start()
        own_redis.pause()
        try:
            r = await client.post("/v1/erasures", headers=bearer(admin),
                                  json={"user_id": "alice"})
            assert r.status_code == 202, r.text
            erasure_id = r.json()["erasure_id"]
            # an attempt has finished its checks (a receipt mid-attempt is still counting)
            job = await _until(client, admin, erasure_id,
                               lambda j: "checked_at" in (j["receipt"] or {}))
            assert job["status"] in ("pending", "running") and job["receipt"]["verified"] \
                is False
            layers = job["receipt"]["layers"]
            assert layers["redis_cache"]["status"] == "unreachable"
            assert layers["session_archive"]["status"] == "verified"
        finally:
            own_redis.resume()
        done = await _until(client, admin, erasure_id, lambda j: j["status"] == "done")
        assert done["receipt"]["verified"] is True
        assert done["receipt"]["layers"]["redis_cache"]["status"] == "verified"
        # checked against the store itself; the tenant's quota buckets (counts, no user data,
        # expiring within seconds) are not the user's
        assert [k for k in await _redis_keys(own_redis, prefix) if b":{q:" not in k] == []


async def _admin_key(client: Client, container: Container, tenant: str) -> str:
    assert container.settings.admin_token is not None
    r = await client.post("/v1/admin/keys", headers={
        "Authorization": f"Bearer {container.settings.admin_token.get_secret_value()}"},
        json={"tenant_id": tenant, "role": "admin", "max_data_level": "internal"})
    assert r.status_code == 201, r.text
    return str(r.json()["api_key"])


async def _until(client: Client, key: str, erasure_id: str,
                 done: Callable[[dict[str, Any]], bool], timeout_s: float = 60) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        r = await client.get(f"/v1/erasures/{erasure_id}", headers=bearer(key))
        assert r.status_code == 200, r.text
        job: dict[str, Any] = r.json()
        if done(job):
            return job
        assert asyncio.get_running_loop().time() < deadline, job
        await asyncio.sleep(0.2)


async def _redis_keys(server: OwnRedis, pattern: str) -> list[bytes]:
    direct = Redis.from_url(server.url)
    try:
        return [k async for k in direct.scan_iter(match=pattern)]
    finally:
        await direct.aclose()
