"""Task checkpoint retention on the real store: a revision older than the retention is not
served (an old row written in place, and an injected clock), a longer retention serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.tasks import PgTaskStore
from app.core.errors import NotFound, StaleRevision
from app.core.model import DataLevel, Principal, Role
from app.service.tasks import TaskService
from bench.ingest import owner_connection
from tests.contract.test_pg_tasks import checkpoint


@pytest.fixture
async def store(pg_owner_url: str) -> AsyncIterator[PgTaskStore]:
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield PgTaskStore(db)
    await db.close()


async def test_expired_checkpoints_are_not_served(store: PgTaskStore, pg_owner_url: str,
                                                  tenant: str) -> None:
    cp = checkpoint("ship the refund fix")
    for goal in ("ship the refund fix", "ship the refund fix today"):
        await store.put(tenant_id=tenant, checkpoint=replace(cp, goal=goal),
                        expected_revision=None)
    conn = await owner_connection(pg_owner_url)
    try:  # revision 1 written 40 days ago
        await conn.execute("UPDATE task_checkpoints SET created_at = now() - interval '40 days' "
                           "WHERE tenant_id = $1 AND task_id = $2 AND revision = 1",
                           tenant, cp.task_id)
    finally:
        await conn.close()
    tasks = TaskService(store)  # the default: 30 days
    with pytest.raises(NotFound):
        await tasks.get(tenant_id=tenant, task_id=cp.task_id, user_id="alice", revision=1)
    latest = await tasks.get(tenant_id=tenant, task_id=cp.task_id, user_id="alice")
    assert (latest.revision, latest.goal) == (2, "ship the refund fix today")

    later = datetime.now(UTC) + timedelta(days=31)
    idle = TaskService(store, now=lambda: later)
    with pytest.raises(NotFound):
        await idle.get(tenant_id=tenant, task_id=cp.task_id, user_id="alice")
    assert await idle.for_turn(tenant_id=tenant, task_id=cp.task_id, user_id="alice") is None
    kept = TaskService(store, retention_days=60, now=lambda: later)
    found = await kept.for_turn(tenant_id=tenant, task_id=cp.task_id, user_id="alice")
    assert found is not None and found.revision == 2


async def test_a_writer_that_saw_no_live_checkpoint_writes_the_next_revision(
        store: PgTaskStore, tenant: str) -> None:
    """The idle task's checkpoint is past its retention, so a turn reads none and its
    compaction commits "the first" revision (expected 0): that is the task's next revision,
    served again, not a conflict at every turn."""
    cp = replace(checkpoint("ship the refund fix"), parent_task_id=None)
    await store.put(tenant_id=tenant, checkpoint=cp, expected_revision=None)
    later = datetime.now(UTC) + timedelta(days=31)
    idle = TaskService(store, now=lambda: later)
    assert await idle.for_turn(tenant_id=tenant, task_id=cp.task_id, user_id="alice") is None
    principal = Principal(key_id="k", tenant_id=tenant, role=Role.RUNTIME,
                          max_data_level=DataLevel.INTERNAL, domains=None)
    revision = await idle.put(principal=principal, checkpoint=replace(
        cp, goal="ship the refund fix, again"), expected_revision=0)
    assert revision == 2
    with pytest.raises(StaleRevision):  # a live checkpoint still guards its revision
        await TaskService(store).put(principal=principal, checkpoint=cp, expected_revision=0)
