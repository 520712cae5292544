"""The erasure job store and layers on real Postgres/Redis: verification and crash resume."""

from __future__ import annotations

import asyncio

from app.adapters.postgres.db import Sql
from app.adapters.postgres.erasure import PgErasureStore, pg_erasers, scrub
from app.adapters.redis.erasure import RedisEraser
from app.main import Container
from app.ports import Eraser, ErasureJob
from app.service.erasure import ErasureService, ErasureWorker, tombstone

CHECKPOINT_SQL = Sql("""
INSERT INTO task_checkpoints (tenant_id, task_id, revision, user_id, body)
VALUES (:t, :task, 1, :u, '{}'::jsonb)""")
RUNNING_SQL = Sql("""
INSERT INTO erasures (tenant_id, erasure_id, user_id, status, requested_by, attempts, receipt,
    started_at)
VALUES (:t, :id, :u, 'running', 'key-admin', 1, '{}'::jsonb, now())""")


def service(container: Container, *, skip: str | None = None) -> ErasureService:
    store = PgErasureStore(container.db)
    every: list[Eraser] = [*pg_erasers(container.db),
             RedisEraser(container.redis, store,  # type: ignore[arg-type]
                         prefix=container.settings.redis_prefix)]
    return ErasureService(store, [e for e in every if e.layer != skip], verify=every)


async def _checkpoint(container: Container, tenant: str, user: str) -> None:
    async with container.db.tenant_tx(tenant) as conn:
        await conn.execute(CHECKPOINT_SQL, {"t": tenant, "task": f"task-{user}", "u": user})


async def _job(svc: ErasureService, tenant: str, erasure_id: str) -> ErasureJob:
    job = await svc._store.get(tenant_id=tenant, erasure_id=erasure_id)
    assert job is not None
    return job


async def test_verification_catches_a_skipped_layer(container: Container, tenant: str) -> None:
    """A layer whose data is still there keeps the job open, its receipt unverified and
    saying which layer; a later attempt that erases it finishes the job."""
    await _checkpoint(container, tenant, "u1")
    svc = service(container, skip="task_checkpoints")
    job = await svc._store.create(tenant_id=tenant, user_id="u1", requested_by="key-admin")
    assert await svc.run(tenant_id=tenant, erasure_id=job.erasure_id)
    open_ = await _job(svc, tenant, job.erasure_id)
    assert open_.status == "running" and open_.user_id == "u1"  # not tombstoned: not done
    layer = open_.receipt["layers"]["task_checkpoints"]
    assert layer == {"found": 0, "erased": 0, "verified_remaining": 1, "status": "remaining",
                     "tables": {}}
    assert open_.receipt["verified"] is False and "finished_at" not in open_.receipt
    others = {k: v["verified_remaining"] for k, v in open_.receipt["layers"].items()}
    assert others == {**dict.fromkeys(others, 0), "task_checkpoints": 1}

    assert await service(container).run(tenant_id=tenant, erasure_id=job.erasure_id)
    done = await _job(svc, tenant, job.erasure_id)
    assert done.status == "done" and done.user_id == tombstone(tenant, "u1")
    assert done.receipt["verified"] is True and done.receipt["layers"]["task_checkpoints"][
        "erased"] == 1


async def test_a_job_left_running_by_a_crash_is_resumed(container: Container, tenant: str) -> None:
    await _checkpoint(container, tenant, "u2")
    async with container.db.tenant_tx(tenant) as conn:
        await conn.execute(RUNNING_SQL, {"t": tenant, "id": "er_crashed", "u": "u2"})
    svc = service(container)
    worker = ErasureWorker(svc, interval_s=0.05)
    worker.start()
    try:
        for _ in range(100):
            job = await _job(svc, tenant, "er_crashed")
            if job.status in ("done", "failed"):
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
    assert job.status == "done" and job.attempts == 2
    assert job.receipt["layers"]["task_checkpoints"]["erased"] == 1


async def test_a_claimed_job_is_not_run_twice(container: Container, tenant: str) -> None:
    svc = service(container)
    job = await svc._store.create(tenant_id=tenant, user_id="u3", requested_by="key-admin")
    async with svc._store.claim(tenant_id=tenant, erasure_id=job.erasure_id) as held:
        assert held is not None and held.status == "running"
        assert not await svc.run(tenant_id=tenant, erasure_id=job.erasure_id)
    assert await svc.run(tenant_id=tenant, erasure_id=job.erasure_id)
    assert (await _job(svc, tenant, job.erasure_id)).status == "done"


def test_scrub_replaces_only_exact_matches() -> None:
    body = {"user_id": "bob", "segments": [{"scope": {"user": "bob"}, "ref": "s://bob#1"}],
            "n": 3, "tags": ["bob", "bobby"]}
    assert scrub(body, "bob", "erased:x") == {
        "user_id": "erased:x", "segments": [{"scope": {"user": "erased:x"}, "ref": "s://bob#1"}],
        "n": 3, "tags": ["erased:x", "bobby"]}
