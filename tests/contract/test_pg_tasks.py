"""PgTaskStore against the real server: revisions kept, optimistic concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.tasks import PgTaskStore
from app.core.errors import StaleRevision
from app.core.model import Constraint, Finding, ScannedPart, TaskCheckpoint, ToolEffect


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=8)
    yield database
    await database.close()


def checkpoint(goal: str, task_id: str = "task-1") -> TaskCheckpoint:
    return TaskCheckpoint(
        task_id=task_id, revision=0, user_id="alice", session_id="s1", parent_task_id="p0",
        goal=goal, accepted_decisions=("use v2",), verified_evidence=("log#3",),
        open_questions=("why?",),
        constraints=(Constraint(text="only staging", kind="only", source_ref="msg:4"),
                     Constraint(text="by friday", kind="deadline")),
        pending_approvals=("deploy",),
        tool_effects=(ToolEffect(effect_id="e1", idempotency_key="k1", status="done", ref="r"),),
        next_safe_action="rerun",
    )


async def test_put_get_roundtrip_and_every_revision_kept(db: Database, tenant: str) -> None:
    store = PgTaskStore(db)
    assert await store.put(tenant_id=tenant, checkpoint=checkpoint("g1"),
                           expected_revision=None) == 1
    assert await store.put(tenant_id=tenant, checkpoint=checkpoint("g2"),
                           expected_revision=1) == 2
    latest = await store.get(tenant_id=tenant, task_id="task-1")
    assert latest is not None
    assert latest.revision == 2 and latest.goal == "g2" and latest.created_at is not None
    first = await store.get(tenant_id=tenant, task_id="task-1", revision=1)
    assert first is not None
    assert replace(first, created_at=None) == replace(checkpoint("g1"), revision=1)
    assert await store.get(tenant_id=tenant, task_id="task-1", revision=3) is None
    assert await store.get(tenant_id=tenant, task_id="missing") is None


async def test_stale_expected_revision(db: Database, tenant: str) -> None:
    store = PgTaskStore(db)
    with pytest.raises(StaleRevision):
        await store.put(tenant_id=tenant, checkpoint=checkpoint("g"), expected_revision=1)
    assert await store.put(tenant_id=tenant, checkpoint=checkpoint("g"), expected_revision=0) == 1
    with pytest.raises(StaleRevision):
        await store.put(tenant_id=tenant, checkpoint=checkpoint("g"), expected_revision=0)


async def test_concurrent_writers_of_one_revision_one_wins(db: Database, tenant: str) -> None:
    store = PgTaskStore(db)
    await store.put(tenant_id=tenant, checkpoint=checkpoint("base"), expected_revision=None)
    results = await asyncio.gather(
        *(store.put(tenant_id=tenant, checkpoint=checkpoint(f"w{i}"), expected_revision=1)
          for i in range(8)),
        return_exceptions=True,
    )
    assert results.count(2) == 1
    assert all(isinstance(r, StaleRevision) for r in results if r != 2)


async def test_concurrent_unconditional_writers_all_land(db: Database, tenant: str) -> None:
    store = PgTaskStore(db)
    results = await asyncio.gather(
        *(store.put(tenant_id=tenant, checkpoint=checkpoint(f"w{i}"), expected_revision=None)
          for i in range(3)),
        return_exceptions=True,
    )
    revisions = [r for r in results if isinstance(r, int)]
    assert len(set(revisions)) == len(revisions)
    assert all(isinstance(r, int | StaleRevision) for r in results)


async def test_tenants_do_not_share_tasks(db: Database, tenant: str, other_tenant: str) -> None:
    store = PgTaskStore(db)
    await store.put(tenant_id=tenant, checkpoint=checkpoint("mine"), expected_revision=None)
    assert await store.get(tenant_id=other_tenant, task_id="task-1") is None
    assert await store.put(tenant_id=other_tenant, checkpoint=checkpoint("theirs"),
                           expected_revision=0) == 1


async def test_task_state_findings_are_kept_for_the_detector_code_that_made_them(
        db: Database, tenant: str) -> None:
    found = (Finding(type="pii.email", action="mask", start=3, end=9),)
    parts = (ScannedPart("core", "d1", found), ScannedPart("detail", "d2", ()))
    store = PgTaskStore(db, detectors="fp-1")
    await store.put(tenant_id=tenant, checkpoint=replace(checkpoint("g"), scanned=parts),
                    expected_revision=None)
    got = await store.get(tenant_id=tenant, task_id="task-1")
    assert got is not None and got.scanned == parts
    # Another detector code reads none of them (the task state is scanned again).
    other = await PgTaskStore(db, detectors="fp-2").get(tenant_id=tenant, task_id="task-1")
    assert other is not None and other.scanned == () and other == got
