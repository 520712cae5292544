"""PgManifestStore and PgAuditLog against the real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from app.adapters.postgres.audit import PgAuditLog
from app.adapters.postgres.db import Database
from app.adapters.postgres.manifests import PgManifestStore
from app.core.errors import InvalidRequest
from app.core.paging import Position
from app.ports import AuditRecord, ManifestFilter, ManifestPage, StoredManifest


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield database
    await database.close()


T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def manifest(turn_id: str, *, session: str = "s1", task: str | None = "t1", minute: int = 0,
             sha: str = "aa") -> StoredManifest:
    body: dict[str, Any] = {
        "turn_id": turn_id, "session_id": session, "task_id": task, "user_id": "alice",
        "created_at": (T0 + timedelta(minutes=minute)).isoformat(), "segments": [{"id": "seg_1"}],
    }
    return StoredManifest(turn_id=turn_id, key_id="key_1", request_sha256=sha, body=body)


def record(turn_id: str | None, kind: str = "dropped.permission.acl") -> AuditRecord:
    return AuditRecord(turn_id=turn_id, kind=kind, principal="key_1", ref="kb://d#v1:c0",
                       rule="acl", detail={"why": "not in group", "n": 1})


async def test_insert_is_idempotent_and_audits_once(db: Database, tenant: str) -> None:
    store, audit = PgManifestStore(db), PgAuditLog(db)
    first = manifest("turn-1")
    written = await store.insert(tenant_id=tenant, manifest=first, audit=[record("turn-1")])
    assert written.existing is None
    retry = manifest("turn-1", sha="bb")
    again = await store.insert(tenant_id=tenant, manifest=retry, audit=[record("turn-1")])
    assert again.existing == first  # the stored one, not the retry
    assert await store.get(tenant_id=tenant, turn_id="turn-1") == first
    rows = await audit.list(tenant_id=tenant, turn_id="turn-1", limit=10)
    assert len(rows) == 1
    assert rows[0]["detail"] == {"why": "not in group", "n": 1}
    assert set(rows[0]) == {"id", "turn_id", "at", "kind", "principal", "ref", "rule", "detail"}
    datetime.fromisoformat(rows[0]["at"])


async def test_audit_failure_rolls_back_the_manifest(db: Database, tenant: str) -> None:
    store = PgManifestStore(db)
    broken = AuditRecord(turn_id="turn-x", kind=None, principal="key_1",  # type: ignore[arg-type]
                         ref=None, rule=None, detail={})
    with pytest.raises(asyncpg.PostgresError):
        await store.insert(tenant_id=tenant, manifest=manifest("turn-x"), audit=[broken])
    assert await store.get(tenant_id=tenant, turn_id="turn-x") is None


async def test_list_filters_newest_first_and_pages(db: Database, tenant: str) -> None:
    store = PgManifestStore(db)
    for i in range(5):
        m = manifest(f"turn-{i}", session="s1" if i % 2 == 0 else "s2", task=None if i == 4
                     else "t1", minute=i)
        await store.insert(tenant_id=tenant, manifest=m, audit=[])
    everything = await store.list(tenant_id=tenant, filt=ManifestFilter())
    assert turns(everything) == ["turn-4", "turn-3", "turn-2", "turn-1", "turn-0"]
    assert everything.next is None
    s1 = await store.list(tenant_id=tenant, filt=ManifestFilter(session_id="s1"))
    assert turns(s1) == ["turn-4", "turn-2", "turn-0"]
    t1 = await store.list(tenant_id=tenant, filt=ManifestFilter(task_id="t1", limit=2))
    assert turns(t1) == ["turn-3", "turn-2"]
    assert t1.next == Position(created_at=T0 + timedelta(minutes=2), turn_id="turn-2")
    page2 = await store.list(tenant_id=tenant, filt=ManifestFilter(task_id="t1", limit=2,
                                                                   after=t1.next))
    assert turns(page2) == ["turn-1", "turn-0"] and page2.next is None
    older = await store.list(tenant_id=tenant, filt=ManifestFilter(
        before=(T0 + timedelta(minutes=2)).isoformat()))
    assert turns(older) == ["turn-1", "turn-0"]
    with pytest.raises(InvalidRequest):
        await store.list(tenant_id=tenant, filt=ManifestFilter(before="yesterday"))


async def test_list_pages_same_instant_turns_of_one_key_exactly_once(
    db: Database, tenant: str
) -> None:
    """Keyset paging on (created_at, turn_id): 25 turns of one instant, interleaved with
    another key's, come back in full pages of the asked key only, each exactly once."""
    store = PgManifestStore(db)
    for i in range(50):
        m = manifest(f"turn-{i:02d}")
        await store.insert(tenant_id=tenant, audit=[], manifest=StoredManifest(
            turn_id=m.turn_id, key_id="key_a" if i % 2 else "key_b", request_sha256="aa",
            body=m.body))
    seen: list[str] = []
    after: Position | None = None
    while True:
        page = await store.list(tenant_id=tenant, filt=ManifestFilter(
            key_id="key_a", limit=7, after=after))
        seen += turns(page)
        if page.next is None:
            assert len(page.manifests) == 25 % 7
            break
        assert len(page.manifests) == 7
        after = page.next
    assert seen == sorted((f"turn-{i:02d}" for i in range(1, 50, 2)), reverse=True)
    assert all(m.key_id == "key_a" for m in (await store.list(
        tenant_id=tenant, filt=ManifestFilter(key_id="key_a", limit=200))).manifests)


async def test_insert_reads_the_sessions_previous_stable_prefix(
    db: Database, tenant: str
) -> None:
    """The prefix-reuse metric's input: the previous turn of the same session (by
    created_at), not another session's, nothing for a session's first turn."""
    store = PgManifestStore(db)

    async def put(turn_id: str, session: str, minute: int, prefix: str) -> str | None:
        m = manifest(turn_id, session=session, minute=minute)
        body = {**m.body, "stable_prefix_sha256": prefix}
        written = await store.insert(tenant_id=tenant, audit=[], manifest=StoredManifest(
            turn_id=turn_id, key_id="key_1", request_sha256="aa", body=body))
        return written.previous_prefix_sha256

    assert await put("t1", "s1", 0, "p1") is None
    assert await put("t2", "s2", 1, "q1") is None  # another session's first turn
    assert await put("t3", "s1", 2, "p1") == "p1"
    assert await put("t4", "s1", 3, "p2") == "p1"
    assert await put("t0", "s1", -1, "p0") is None  # written late, but the session's first


def turns(page: ManifestPage) -> list[str]:
    return [m.turn_id for m in page.manifests]


async def test_manifests_and_audit_are_per_tenant(
    db: Database, tenant: str, other_tenant: str
) -> None:
    store, audit = PgManifestStore(db), PgAuditLog(db)
    await store.insert(tenant_id=tenant, manifest=manifest("turn-1"), audit=[record("turn-1")])
    assert await store.get(tenant_id=other_tenant, turn_id="turn-1") is None
    assert turns(await store.list(tenant_id=other_tenant, filt=ManifestFilter())) == []
    assert await audit.list(tenant_id=other_tenant, turn_id=None, limit=10) == []
    # The same turn id in another tenant is its own manifest.
    assert (await store.insert(tenant_id=other_tenant, manifest=manifest("turn-1"),
                               audit=[])).existing is None


async def test_audit_write_and_list(db: Database, tenant: str) -> None:
    audit = PgAuditLog(db)
    await audit.write(tenant_id=tenant, records=[])
    await audit.write(tenant_id=tenant, records=[record(None, "key.created"), record("turn-9")])
    rows = await audit.list(tenant_id=tenant, turn_id=None, limit=10)
    assert [r["kind"] for r in rows] == ["dropped.permission.acl", "key.created"]  # newest first
    assert rows[1]["turn_id"] is None
    assert len(await audit.list(tenant_id=tenant, turn_id=None, limit=1)) == 1
    assert [r["turn_id"] for r in await audit.list(tenant_id=tenant, turn_id="turn-9",
                                                   limit=10)] == ["turn-9"]
