"""Retention on the real stores: rows past their age go in batches, younger ones stay, a dry
run changes nothing, the Redis tails of pruned sessions go with them (and a pruned session
reads as absent, never a 500, never its old events), a newer manifest still reads after older
ones are pruned, the metrics move, and the app role cannot prune audit records younger than
the function's floor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from app.adapters.postgres.db import Sql
from app.adapters.redis.keys import session_key, tail_key
from app.adapters.redis.session_keys import SESSION_KINDS
from app.main import Container
from app.ports import AuditRecord, PruneBatch
from app.service.retention import RetentionPolicy, RetentionService
from app.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

OLD_SAID = "retention-canary-old-session"
COUNT = {
    "manifests": "SELECT count(*) FROM manifests WHERE tenant_id = $1",
    "audit_log": "SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND kind = 'test.kept'",
    "sessions": "SELECT count(*) FROM sessions WHERE tenant_id = $1",
    "session_events": "SELECT count(*) FROM session_events WHERE tenant_id = $1",
    "knowledge_documents": "SELECT count(*) FROM knowledge_documents WHERE tenant_id = $1",
    "knowledge_chunks": "SELECT count(*) FROM knowledge_chunks WHERE tenant_id = $1",
}
AGE = [  # what the test makes old, as the owner (the app role may not back-date rows)
    "UPDATE manifests SET created_at = now() - interval '40 days' "
    "WHERE tenant_id = $1 AND turn_id LIKE 'turn-old-%'",
    "UPDATE audit_log SET at = now() - interval '400 days' "
    "WHERE tenant_id = $1 AND kind = 'test.old'",
    "UPDATE sessions SET updated_at = now() - interval '100 days' "
    "WHERE tenant_id = $1 AND session_id = 's-old'",
    # v1 superseded by v2 50 days ago: past the 30 days. v2 superseded by v3 just now: kept.
    "UPDATE knowledge_documents SET created_at = now() - interval '60 days' "
    "WHERE tenant_id = $1 AND doc_id = 'runbook' AND version = 'v1'",
    "UPDATE knowledge_documents SET created_at = now() - interval '50 days' "
    "WHERE tenant_id = $1 AND doc_id = 'runbook' AND version = 'v2'",
]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"retention_batch": 2})


@pytest.fixture
async def owner(pg_owner_url: str) -> AsyncIterator[asyncpg.Connection]:
    url = make_url(pg_owner_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


def redis(container: Container) -> Any:
    return container.redis  # typed as object in the container


async def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.text}"
    return r.json() if r.content else None


async def counts(owner: asyncpg.Connection, tenant: str) -> dict[str, int]:
    return {table: int(await owner.fetchval(sql, tenant)) for table, sql in COUNT.items()}


async def plant(c: httpx.AsyncClient, container: Container, tenant: str, key: str) -> None:
    for sid, n in (("s-old", 5), ("s-new", 2)):
        await ok(await c.post(f"/v1/sessions/{sid}/events", headers=bearer(key), json={
            "user_id": "alice", "events": [
                {"type": "message", "role": "user", "content": f"{OLD_SAID} {sid} {i}"}
                for i in range(n)]}), 201)
    for version in ("v1", "v2", "v3"):
        await ok(await c.post("/v1/knowledge/documents", headers=bearer(key), json={
            "doc_id": "runbook", "version": version, "sensitivity": "internal",
            "trust": "reviewed", "acl": None, "domain": "payments",
            "text": f"Refund runbook {version}: retries are capped at three."}), 201)
    for turn_id in ("turn-old-1", "turn-old-2", "turn-old-3", "turn-new"):
        await ok(await c.post("/v1/context", headers=bearer(key),
                              json=turn(turn_id=turn_id)))
    await container.audit.write(tenant_id=tenant, records=[
        AuditRecord(turn_id=None, kind=kind, principal="k", ref=None, rule=None, detail={})
        for kind in ("test.old",) * 3 + ("test.kept",) * 2])


async def test_retention_prunes_old_rows_in_batches_and_keeps_the_rest(
        client: httpx.AsyncClient, container: Container, make_key: KeyMaker, tenant: str,
        other_tenant: str, owner: asyncpg.Connection) -> None:
    key, ops = await make_key(tenant), await make_key(tenant, role="ops")
    await plant(client, container, tenant, key)
    other = await make_key(other_tenant)
    await plant(client, container, other_tenant, other)
    for sql in AGE:
        await owner.execute(sql, tenant)
    old_audit = "SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND kind = 'test.old'"
    tail = tail_key(container.settings.redis_prefix, tenant, "s-old")
    assert await redis(container).exists(tail) == 1  # the append cached it
    before = await counts(owner, tenant)
    assert before["sessions"] == 2 and before["session_events"] == 7
    assert before["manifests"] == 4 and before["knowledge_documents"] == 3

    dry = await container.retention.run(dry_run=True, tenant_ids=[tenant])
    assert dry.rows == {"manifests": 3, "audit_log": 3, "sessions": 1, "session_events": 5,
                        "knowledge_documents": 1, "manifest_replays": 3,
                        "knowledge_chunks": dry.rows["knowledge_chunks"]}
    assert dry.rows["knowledge_chunks"] >= 1
    assert await counts(owner, tenant) == before  # a dry run deletes nothing
    assert await owner.fetchval(old_audit, tenant) == 3
    assert await redis(container).exists(tail) == 1
    assert container.metrics.retention_last_run._value.get() == 0  # a dry run is no run
    pruned_before = container.metrics.retention_pruned.labels(table="manifests")._value.get()

    report = await container.retention.run(tenant_ids=[tenant, other_tenant])
    assert report.rows == dry.rows and not report.failed_tenants
    # Batches of 2: stored responses 2+1+0, manifests 2+1+0, audit 2+1+0, sessions 1+0,
    # knowledge 1+0; then one empty batch per target of the other tenant.
    assert report.batches == 3 + 3 + 3 + 2 + 2 + 5
    after = await counts(owner, tenant)
    assert after == {**before, "manifests": 1, "sessions": 1, "session_events": 2,
                     "knowledge_documents": 2,
                     "knowledge_chunks": before["knowledge_chunks"] - dry.rows[
                         "knowledge_chunks"]}
    assert await owner.fetchval(old_audit, tenant) == 0
    versions = await owner.fetch("SELECT version FROM knowledge_documents WHERE tenant_id = $1 "
                                 "ORDER BY version", tenant)
    assert [r["version"] for r in versions] == ["v2", "v3"]
    assert (await counts(owner, other_tenant))["manifests"] == 4  # young: untouched

    # Metrics: rows per table, the last run's end and duration.
    m = container.metrics
    assert m.retention_pruned.labels(table="manifests")._value.get() == pruned_before + 3
    assert m.retention_pruned.labels(table="session_events")._value.get() >= 5
    assert m.retention_last_run._value.get() > 0
    assert m.retention_duration._value.get() == pytest.approx(report.duration_s)

    # The pruned session: its tail is gone, it reads as absent (404, not 500), and a turn on
    # its id starts a new session that shows none of the pruned events.
    assert await redis(container).exists(tail) == 0
    r = await client.get("/v1/sessions/s-old/events?user_id=alice", headers=bearer(key))
    assert r.status_code == 404, r.text
    body = await ok(await client.post("/v1/context", headers=bearer(key),
                                      json=turn(turn_id="turn-after", session_id="s-old")))
    assert OLD_SAID + " s-old" not in str(body)
    new = await ok(await client.get("/v1/sessions/s-new/events?user_id=alice",
                                    headers=bearer(key)))
    assert len(new["events"]) == 2

    # Manifests: the newer one still reads; a pruned one is a plain 404.
    assert (await ok(await client.get("/v1/manifests/turn-new", headers=bearer(ops))))
    gone = await client.get("/v1/manifests/turn-old-1", headers=bearer(ops))
    assert gone.status_code == 404

    # A second run finds nothing left.
    again = await container.retention.run(tenant_ids=[tenant])
    assert sum(again.rows.values()) == 0


async def test_the_app_role_cannot_prune_young_audit_records(
        container: Container, tenant: str) -> None:
    await container.audit.write(tenant_id=tenant, records=[AuditRecord(
        turn_id=None, kind="test.fresh", principal="k", ref=None, rule=None, detail={})])
    with pytest.raises(asyncpg.RaiseError, match="younger than"):
        async with container.db.tenant_tx(tenant) as tx:
            await tx.fetchval(Sql("SELECT ctxgate_prune_audit_log(0, 100)"))
    for forbidden in ("DELETE FROM audit_log WHERE tenant_id = :t",
                      "UPDATE audit_log SET at = now() - interval '9 years' "
                      "WHERE tenant_id = :t"):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with container.db.tenant_tx(tenant) as tx:
                await tx.execute(Sql(forbidden), {"t": tenant})
    # Without a tenant (RLS binds the function's owner too) it deletes nothing.
    async with container.db.unscoped_tx() as tx:
        assert await tx.fetchval(Sql("SELECT ctxgate_prune_audit_log(1, 100)")) == 0


async def _redis_keys(container: Container, tenant: str, needle: str) -> list[bytes]:
    ns = f"{container.settings.redis_prefix}:t:{tenant}:"
    return [k async for k in redis(container).scan_iter(match=f"{ns}*")
            if needle in (k.decode() if isinstance(k, bytes) else str(k))]


async def test_retention_and_erasure_of_the_same_user_leave_nothing_behind(
        client: httpx.AsyncClient, container: Container, make_key: KeyMaker, tenant: str,
        owner: asyncpg.Connection) -> None:
    key, ops, admin = (await make_key(tenant), await make_key(tenant, role="ops"),
                       await make_key(tenant, role="admin"))
    for sid in ("s-carol-old", "s-carol-new"):
        await ok(await client.post(f"/v1/sessions/{sid}/events", headers=bearer(key), json={
            "user_id": "carol", "events": [
                {"type": "message", "role": "user", "content": f"{OLD_SAID} {sid}"}]}), 201)
        await ok(await client.post("/v1/context", headers=bearer(key), json=turn(
            user_id="carol", turn_id=f"turn-{sid}", session_id=sid)))
    await owner.execute("UPDATE sessions SET updated_at = now() - interval '100 days' "
                        "WHERE tenant_id = $1 AND session_id = 's-carol-old'", tenant)
    await owner.execute("UPDATE manifests SET created_at = now() - interval '40 days' "
                        "WHERE tenant_id = $1 AND turn_id = 'turn-s-carol-old'", tenant)

    # Retention first: the old session and its tail go; the erasure then plans only what is
    # left and still verifies every layer at zero.
    pruned = await container.retention.run(tenant_ids=[tenant])
    assert pruned.rows["sessions"] == 1 and pruned.rows["manifests"] == 1
    assert await _redis_keys(container, tenant, "{s:s-carol-old}") == []  # tail and pins
    container.erasure_worker.start()
    try:
        accepted = await ok(await client.post("/v1/erasures", headers=bearer(admin),
                                              json={"user_id": "carol"}), 202)
        for _ in range(100):
            got = await ok(await client.get(f"/v1/erasures/{accepted['erasure_id']}",
                                            headers=bearer(ops)))
            if got["status"] in ("done", "failed"):
                break
            await asyncio.sleep(0.1)
    finally:
        await container.erasure_worker.stop()
    assert got["status"] == "done" and got["receipt"]["verified"] is True, got
    assert (await counts(owner, tenant))["sessions"] == 0

    # Retention after the erasure: nothing to delete, nothing comes back in either store.
    again = await container.retention.run(tenant_ids=[tenant])
    assert sum(again.rows.values()) == 0 and not again.failed_tenants
    assert (await counts(owner, tenant))["sessions"] == 0
    assert await _redis_keys(container, tenant, "{s:s-carol") == []
    kept = await ok(await client.get("/v1/manifests/turn-s-carol-new", headers=bearer(ops)))
    # Tombstoned by the erasure, not pruned (it is young); "carol" alone is the user id.
    assert kept["turn_id"] == "turn-s-carol-new" and "'carol'" not in str(kept)


def test_every_per_session_redis_key_kind_is_dropped_with_a_pruned_session() -> None:
    """A new kind of per-session key must join SESSION_KINDS, or a pruned session's would
    outlive it and be picked up by a later session of the same id."""
    import pathlib
    import re

    used = set()
    for path in pathlib.Path("app").rglob("*.py"):
        used |= set(re.findall(r'session_key\([^)]*?"(\w+)"\)', path.read_text()))
    assert used and used <= set(SESSION_KINDS), used


async def test_runs_do_not_overlap_and_a_pinned_snapshot_goes_with_its_session(
        container: Container, tenant: str, owner: asyncpg.Connection,
        client: httpx.AsyncClient, make_key: KeyMaker) -> None:
    key = await make_key(tenant)
    await ok(await client.post("/v1/sessions/s-pin/events", headers=bearer(key), json={
        "user_id": "alice", "events": [{"type": "message", "role": "user", "content": "hi"}]}),
        201)
    pins = session_key(container.settings.redis_prefix, tenant, "s-pin", "pins")
    await redis(container).set(pins, b"stale snapshot", ex=60)
    await owner.execute("UPDATE sessions SET updated_at = now() - interval '100 days' "
                        "WHERE tenant_id = $1 AND session_id = 's-pin'", tenant)
    store = container.retention._store  # the lock another process holds
    async with store.exclusive() as mine:
        assert mine
        skipped = await container.retention.run(tenant_ids=[tenant])
        assert skipped.skipped and sum(skipped.rows.values()) == 0
    assert await redis(container).exists(pins) == 1
    report = await container.retention.run(tenant_ids=[tenant])
    assert not report.skipped and report.rows["sessions"] == 1
    assert await redis(container).exists(pins) == 0


class _FlakyStore:
    """A fake of the port: tenant "bad" fails mid-run, "good" has one batch of manifests."""

    def __init__(self) -> None:
        self.left = {"good": 3}

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[bool]:
        yield True

    async def tenants(self) -> list[str]:
        return ["bad", "good"]

    async def count(self, **_: Any) -> dict[str, int]:
        return {}

    async def prune(self, *, tenant_id: str, target: str, older_than_days: int,
                    max_rows: int) -> PruneBatch:
        if tenant_id == "bad":
            raise ConnectionError("store went away")
        if target == "sessions":
            n, self.left[tenant_id] = self.left[tenant_id], 0
            return PruneBatch(rows={"sessions": n}, session_ids=("s1",) if n else ())
        return PruneBatch(rows={target: 0})


class _DownCache:
    async def drop(self, *, tenant_id: str, session_id: str) -> None:
        raise ConnectionError("redis down")


async def test_a_failing_tenant_or_redis_does_not_stop_the_others() -> None:
    service = RetentionService(_FlakyStore(), _DownCache(), RetentionPolicy(batch=10))
    report = await service.run()
    assert report.failed_tenants == ["bad"] and report.tenants == 2
    assert report.rows["sessions"] == 3  # pruned; its cached keys left to their TTL
