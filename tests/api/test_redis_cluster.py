"""The service on a real 3-master Redis Cluster (issue 19, item 9): a session's tail, pins
and replay entries, transcript recall and a verified erasure, through the API."""

from __future__ import annotations

import httpx

from app.main import Container, create_app
from app.settings import Settings
from tests.api.conftest import bearer
from tests.api.seed import session, turn
from tests.api.test_erasures import wait_finished


async def test_turns_and_erasure_on_a_redis_cluster(
        settings: Settings, redis_cluster_url: str, tenant: str) -> None:
    container = await Container.open(settings.model_copy(update={"redis_url": redis_cluster_url}))
    container.erasure_worker.start()
    try:
        transport = httpx.ASGITransport(app=create_app(container=container))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert container.settings.admin_token is not None
            admin_token = {"Authorization":
                           f"Bearer {container.settings.admin_token.get_secret_value()}"}

            async def key(role: str) -> str:
                r = await client.post("/v1/admin/keys", headers=admin_token, json={
                    "tenant_id": tenant, "role": role, "max_data_level": "internal"})
                assert r.status_code == 201, r.text
                return str(r.json()["api_key"])

            runtime, admin = await key("runtime"), await key("admin")
            await session(client, runtime, "c-1", n=4)
            first = await client.post("/v1/context", headers=bearer(runtime),
                                      json=turn(session_id="c-1", turn_id="t-1"))
            assert first.status_code == 200, first.text
            assert first.json()["manifest"]["degraded"] == []  # tail, pins, replay: cluster
            again = await client.post("/v1/context", headers=bearer(runtime),
                                      json=turn(session_id="c-1", turn_id="t-1"))
            assert again.content == first.content  # the replay entry, from its slot

            r = await client.post("/v1/erasures", headers=bearer(admin),
                                  json={"user_id": "alice"})
            done = await wait_finished(client, admin, r.json()["erasure_id"])
            assert done["status"] == "done", done
            assert done["receipt"]["layers"]["redis_cache"]["erased"] >= 2  # tail + replay
            # nothing of alice's is left; the tenant's quota buckets hold counts, no user
            # data, and expire by themselves within seconds (app/adapters/redis/quotas.py)
            assert [k async for k in container.redis.scan_iter(  # type: ignore[attr-defined]
                match=f"{container.settings.redis_prefix}:*") if b":{q:" not in k] == []
    finally:
        await container.close()
